"""admission corroboration: job changes the watch saw, and the verdict on each unverified admission record

An admission record from a caller without a client certificate (``caller: unverified``) claims
a change anyone reaching the webhook could have made up. The audit consumer keeps the job
changes the watch stream shows (``watch_changes``: kept a day) and decides, once per record,
whether the claim is borne out (``admission_corroborations``: ``verified``, or ``unmatched``
once the window has passed without the change). The audit chain itself is never updated.

The runtime role may read and add verdicts, never change or remove them.
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import TS, separate_role

revision: str = "0007"
down_revision: str | None = "0006"


def upgrade() -> None:
    op.create_table(
        "watch_changes",
        sa.Column("uid", sa.String(64), nullable=False),
        sa.Column("resource_version", sa.String(64), nullable=False),
        sa.Column("change", sa.String(16), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("observed_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("uid", "resource_version", "change"),
    )
    op.create_index("ix_watch_changes_object", "watch_changes", ["namespace", "kind", "name", "observed_at"])
    op.create_table(
        "admission_corroborations",
        # no foreign key to audit_records: refusing a TRUNCATE there stays the trigger's job
        sa.Column("audit_seq", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("observed_at", TS, nullable=True),
        sa.Column("decided_at", TS, nullable=False),
        sa.PrimaryKeyConstraint("audit_seq"),
        sa.CheckConstraint("status IN ('verified', 'unmatched')", name="ck_admission_corroborations_status"),
    )
    role = separate_role()
    if role is not None:  # the runtime role adds verdicts; it may not rewrite or remove them
        op.execute(f"REVOKE UPDATE, DELETE, TRUNCATE ON admission_corroborations FROM {role}")


def downgrade() -> None:
    op.drop_table("admission_corroborations")
    op.drop_index("ix_watch_changes_object", table_name="watch_changes")
    op.drop_table("watch_changes")
