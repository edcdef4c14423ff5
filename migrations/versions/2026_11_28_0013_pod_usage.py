"""pod usage: what each launcher and worker pod used, read from the cluster's Prometheus

One row per pod (GPU utilization and framebuffer per GPU, memory working set against the
limit, CPU against the request, and the curves of the last reading), refreshed while the pod
runs and final once read over its whole life; kept after the pod is deleted.

Other branches may add migrations numbered 0013 too; this one's slug is ``pod_usage`` so it
can be renumbered.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 00:13:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "pod_usage",
        sa.Column("pod_uid", sa.String(64), primary_key=True),
        sa.Column("run_uid", sa.String(64), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("index", sa.Integer(), nullable=True),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("final", sa.Boolean(), nullable=False),
        sa.Column("gpus", postgresql.JSONB(), nullable=True),
        sa.Column("gpu_util_curve", postgresql.JSONB(), nullable=False),
        sa.Column("memory_max_bytes", sa.Float(), nullable=True),
        sa.Column("memory_limit_bytes", sa.Float(), nullable=True),
        sa.Column("memory_curve", postgresql.JSONB(), nullable=False),
        sa.Column("cpu_mean_cores", sa.Float(), nullable=True),
        sa.Column("cpu_max_cores", sa.Float(), nullable=True),
        sa.Column("cpu_requested_cores", sa.Float(), nullable=True),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_pod_usage_run_uid", "pod_usage", ["run_uid"])


def downgrade() -> None:
    op.drop_index("ix_pod_usage_run_uid", table_name="pod_usage")
    op.drop_table("pod_usage")
