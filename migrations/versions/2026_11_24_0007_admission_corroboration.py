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
from controller.store.migrations.shapes import columns, separate_role

revision: str = "0007"
down_revision: str | None = "0006"


def upgrade() -> None:
    op.create_table(
        "watch_changes",
        *columns("""
        uid               varchar(64)   not null
        resource_version  varchar(64)   not null
        change            varchar(16)   not null
        namespace         varchar(253)  not null
        kind              varchar(64)   not null
        name              varchar(253)  not null
        observed_at       ts            not null
        """),
        sa.PrimaryKeyConstraint("uid", "resource_version", "change"),
    )
    op.create_index("ix_watch_changes_object", "watch_changes", ["namespace", "kind", "name", "observed_at"])
    op.create_table(
        "admission_corroborations",
        # no foreign key to audit_records: refusing a TRUNCATE there stays the trigger's job
        *columns("""
        audit_seq    bigint       not null
        status       varchar(16)  not null
        observed_at  ts           null
        decided_at   ts           not null
        """),
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
