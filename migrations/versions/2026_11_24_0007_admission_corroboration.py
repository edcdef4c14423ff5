"""admission corroboration: job changes the watch saw, and the verdict on each unverified admission record

An admission record from a caller without a client certificate (``caller: unverified``) claims
a change anyone reaching the webhook could have made up. The audit consumer keeps the job
changes the watch stream shows (``watch_changes``: kept a day) and decides, once per record,
whether the claim is borne out (``admission_corroborations``: ``verified``, or ``unmatched``
once the window has passed without the change). The audit chain itself is never updated.

The runtime role may read and add verdicts, never change or remove them.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 01:00:00
"""

import importlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "watch_changes",
        sa.Column("uid", sa.String(64), nullable=False),
        sa.Column("resource_version", sa.String(64), nullable=False),
        sa.Column("change", sa.String(16), nullable=False),
        sa.Column("namespace", sa.String(253), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("name", sa.String(253), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("uid", "resource_version", "change"),
    )
    op.create_index("ix_watch_changes_object", "watch_changes", ["namespace", "kind", "name", "observed_at"])
    op.create_table(
        "admission_corroborations",
        # no foreign key to audit_records: refusing a TRUNCATE there stays the trigger's job
        sa.Column("audit_seq", sa.BigInteger, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("audit_seq"),
        sa.CheckConstraint("status IN ('verified', 'unmatched')", name="ck_admission_corroborations_status"),
    )
    bind = op.get_bind()
    current = bind.exec_driver_sql("SELECT current_user").scalar_one()
    single_role = context.config.get_main_option("mpijc_single_role") == "true"
    role = current if single_role else importlib.import_module(_ROLES).runtime_role()
    if role != current:  # the runtime role adds verdicts; it may not rewrite or remove them
        op.execute(f"REVOKE UPDATE, DELETE, TRUNCATE ON admission_corroborations FROM {role}")


_ROLES = "controller.store.migrations.versions.2026_11_24_0006_audit_roles"


def downgrade() -> None:
    op.drop_table("admission_corroborations")
    op.drop_index("ix_watch_changes_object", table_name="watch_changes")
    op.drop_table("watch_changes")
