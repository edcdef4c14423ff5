"""pod usage: what each launcher and worker pod used, read from the cluster's Prometheus

One row per pod (GPU utilization and framebuffer per GPU, memory working set against the
limit, CPU against the request, and the curves of the last reading), refreshed while the pod
runs and final once read over its whole life; kept after the pod is deleted.
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import JSONB, TS

revision: str = "0013"
down_revision: str | None = "0012"


def upgrade() -> None:
    op.create_table(
        "pod_usage",
        sa.Column("pod_uid", sa.String(64), primary_key=True),
        sa.Column("run_uid", sa.String(64), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("index", sa.Integer(), nullable=True),
        sa.Column("since", TS, nullable=False),
        sa.Column("until", TS, nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("gpus", JSONB, nullable=True),
        sa.Column("gpu_util_curve", JSONB, nullable=False),
        sa.Column("memory_max_bytes", sa.Float(), nullable=True),
        sa.Column("memory_limit_bytes", sa.Float(), nullable=True),
        sa.Column("memory_curve", JSONB, nullable=False),
        sa.Column("cpu_mean_cores", sa.Float(), nullable=True),
        sa.Column("cpu_max_cores", sa.Float(), nullable=True),
        sa.Column("cpu_requested_cores", sa.Float(), nullable=True),
        sa.Column("observed_at", TS, nullable=False),
    )
    op.create_index("ix_pod_usage_run_uid", "pod_usage", ["run_uid"])


def downgrade() -> None:
    op.drop_index("ix_pod_usage_run_uid", table_name="pod_usage")
    op.drop_table("pod_usage")
