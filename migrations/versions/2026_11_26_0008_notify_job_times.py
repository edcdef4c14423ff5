"""notify job times: a finding's webhook says when its job was created, started and finished

The notify consumer builds a finding's job context from what it last saw of the job
(``notify_jobs``), which held no times, so every ``finding.*`` payload carried
``created_at: null``. The columns are nullable: rows of jobs seen before this migration have
no times until their next observation.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26 01:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIMES = ("created_at", "started_at", "finished_at")


def upgrade() -> None:
    for column in _TIMES:
        op.add_column("notify_jobs", sa.Column(column, sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    for column in reversed(_TIMES):
        op.drop_column("notify_jobs", column)
