"""pod replica: the replica type of a training-operator job's pod (Master, Worker, PS, …)

``pods.replica`` names which replica a pod is, with ``index`` (``Master-0``, ``Worker-3``);
the pods of an MPIJob or a TrainJob keep it NULL (their ``role`` says launcher or worker).
Existing rows get NULL.

Other branches may add migrations numbered 0013 too; this one's slug is ``pod_replica`` so it
can be renumbered.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-28 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("pods", sa.Column("replica", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("pods", "replica")
