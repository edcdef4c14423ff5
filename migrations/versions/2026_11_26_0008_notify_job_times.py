"""notify job times: a finding's webhook says when its job was created, started and finished

The notify consumer builds a finding's job context from what it last saw of the job
(``notify_jobs``), which held no times, so every ``finding.*`` payload carried
``created_at: null``. The columns are nullable: rows of jobs seen before this migration have
no times until their next observation.
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import TS

revision: str = "0008"
down_revision: str | None = "0007"

_TIMES = ("created_at", "started_at", "finished_at")


def upgrade() -> None:
    for column in _TIMES:
        op.add_column("notify_jobs", sa.Column(column, TS, nullable=True))


def downgrade() -> None:
    for column in reversed(_TIMES):
        op.drop_column("notify_jobs", column)
