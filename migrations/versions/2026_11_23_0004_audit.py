"""audit: the append-only, hash-chained audit table and the exporters' cursors

The table refuses UPDATE, DELETE and TRUNCATE through a trigger. The one exception is the
audited retention purge (:func:`controller.store.auditchain.purge`): inside its own transaction it
sets ``mpijc.audit_purge`` to ``on`` with ``set_config(..., true)`` (transaction-local), deletes
the oldest records and appends a purge record stating what it removed, all in one commit.
UPDATE stays refused even then. See ``docs/audit.md``.
"""

import sqlalchemy as sa
from alembic import op
from controller.store.migrations.shapes import columns

revision: str = "0004"
down_revision: str | None = "0003"

APPEND_ONLY = """
CREATE FUNCTION audit_records_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' AND current_setting('mpijc.audit_purge', true) = 'on' THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit_records is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'records leave only through the audited purge (docs/audit.md)';
END
$$
"""


def upgrade() -> None:
    op.create_table(
        "audit_records",
        *columns("""
        seq          bigint        not null no serial
        event_id     varchar(255)  not null
        recorded_at  ts            not null
        at           ts            not null
        namespace    varchar(253)  null
        source       varchar(16)   not null
        verb         varchar(16)   not null
        kind         varchar(64)   null
        name         varchar(253)  null
        object_uid   varchar(64)   null
        username     text          null
        record       jsonb         not null
        prev_hash    varchar(64)   not null
        hash         varchar(64)   not null
        """),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("event_id"),
    )
    op.create_index("ix_audit_records_at", "audit_records", ["at"], unique=False)
    op.create_index("ix_audit_records_ns_at", "audit_records", ["namespace", "at"], unique=False)
    op.create_index("ix_audit_records_object_uid", "audit_records", ["object_uid"], unique=False)
    op.create_table(
        "audit_export_cursors",
        *columns("""
        sink        varchar(512)  not null
        last_seq    bigint        not null
        exported    bigint        not null
        updated_at  ts            not null
        """),
        sa.PrimaryKeyConstraint("sink"),
    )
    op.execute(APPEND_ONLY)
    op.execute(
        "CREATE TRIGGER audit_records_append_only BEFORE UPDATE OR DELETE ON audit_records "
        "FOR EACH ROW EXECUTE FUNCTION audit_records_append_only()"
    )
    op.execute(
        "CREATE TRIGGER audit_records_no_truncate BEFORE TRUNCATE ON audit_records "
        "FOR EACH STATEMENT EXECUTE FUNCTION audit_records_append_only()"
    )


def downgrade() -> None:
    op.drop_table("audit_export_cursors")
    op.drop_index("ix_audit_records_object_uid", table_name="audit_records")
    op.drop_index("ix_audit_records_ns_at", table_name="audit_records")
    op.drop_index("ix_audit_records_at", table_name="audit_records")
    op.drop_table("audit_records")  # its triggers go with it
    op.execute("DROP FUNCTION audit_records_append_only()")
