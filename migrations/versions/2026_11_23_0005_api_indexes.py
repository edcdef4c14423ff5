"""api indexes: label selector and job name filter of the runs list

Without them a label or a name that matches no run reads the whole table (≈125 ms p95 at
100,000 runs, measured by ``benchmarks/api.py``); with them it is an index probe. Built
``CONCURRENTLY`` would keep writes going on a large table, but Alembic runs in a
transaction; at the sizes this store reaches (hundreds of thousands of runs) a plain build
takes well under a second.
"""

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"


def upgrade() -> None:
    op.create_index(
        "ix_runs_labels",
        "runs",
        ["labels"],
        unique=False,
        postgresql_using="gin",
        postgresql_ops={"labels": "jsonb_path_ops"},
    )
    op.create_index("ix_runs_name_created", "runs", ["name", "created_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_runs_name_created", table_name="runs")
    op.drop_index("ix_runs_labels", table_name="runs", postgresql_using="gin")
