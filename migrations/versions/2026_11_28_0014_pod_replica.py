"""pod replica: the replica type of a training-operator job's pod (Master, Worker, PS, …)

``pods.replica`` names which replica a pod is, with ``index`` (``Master-0``, ``Worker-3``);
the pods of an MPIJob or a TrainJob keep it NULL (their ``role`` says launcher or worker).
Existing rows get NULL.
"""

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"


def upgrade() -> None:
    op.add_column("pods", sa.Column("replica", sa.String(16), nullable=True))


def downgrade() -> None:
    op.drop_column("pods", "replica")
