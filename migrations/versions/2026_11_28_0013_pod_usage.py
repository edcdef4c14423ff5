"""pod usage: what each launcher and worker pod used, read from the cluster's Prometheus

One row per pod (GPU utilization and framebuffer per GPU, memory working set against the
limit, CPU against the request, and the curves of the last reading), refreshed while the pod
runs and final once read over its whole life; kept after the pod is deleted.
"""

from alembic import op
from controller.store.migrations.shapes import columns

revision: str = "0013"
down_revision: str | None = "0012"


def upgrade() -> None:
    op.create_table(
        "pod_usage",
        *columns("""
        pod_uid              varchar(64)   key
        run_uid              varchar(64)   not null
        namespace            varchar(253)  not null
        name                 varchar(253)  not null
        role                 varchar(16)   not null
        index                int           null
        since                ts            not null
        until                ts            not null
        final                bool          not null
        gpus                 jsonb         null
        gpu_util_curve       jsonb         not null
        memory_max_bytes     float         null
        memory_limit_bytes   float         null
        memory_curve         jsonb         not null
        cpu_mean_cores       float         null
        cpu_max_cores        float         null
        cpu_requested_cores  float         null
        observed_at          ts            not null
        """),
    )
    op.create_index("ix_pod_usage_run_uid", "pod_usage", ["run_uid"])


def downgrade() -> None:
    op.drop_index("ix_pod_usage_run_uid", table_name="pod_usage")
    op.drop_table("pod_usage")
