"""run manifests: each run keeps the job as submitted (YAML, redacted, at most 64 KiB)

The watcher publishes with every job observation its manifest as submitted (``apiVersion``,
``kind``, the metadata a person wrote, the ``spec``; never ``status`` or ``managedFields``;
secrets of recognisable shape redacted; cut to 64 KiB with a closing "truncated" line:
``watchers/manifests.py``). The Configuration tab shows it and Compare diffs it. Nullable: runs
stored before, and observations of an older watcher, have none (the spec summary stays).
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"


def upgrade() -> None:
    op.add_column("runs", sa.Column("manifest", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "manifest")
