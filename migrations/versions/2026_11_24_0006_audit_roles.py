"""audit roles: the runtime role may only read and append audit records; purge through one function

Migrations run as the **owner** role (``MPIJC_DATABASE__OWNER_URL``); the processes run as the
**runtime** role (``MPIJC_DATABASE__RUNTIME_ROLE``, default ``mpijc_runtime``). This revision

- creates the runtime role (``LOGIN``, no password) when it is missing and the owner may;
- moves the tables the runtime role owns (an installation that migrated with the runtime
  credentials) to the owner;
- grants the runtime role DML on every table (also future ones, by default privileges), but
  only ``SELECT, INSERT`` on ``audit_records`` and ``SELECT`` on ``alembic_version``: no UPDATE,
  DELETE, TRUNCATE, TRIGGER, and, not owning the table, no ALTER;
- defines ``audit_purge(…)``, ``SECURITY DEFINER`` with a pinned ``search_path``, the one way
  records leave the table: it removes a prefix of the chain recorded before a cutoff (at least
  a day ago by the database's clock), checks that the purge record it is given describes exactly
  that, and appends it. The runtime role may only EXECUTE it.

In single-role mode (the runtime role is the role migrating, e.g. on a laptop) there is
nothing to grant or revoke; the function is still the purge path.

Idempotent: safe to run again (``CREATE OR REPLACE``, ``IF NOT EXISTS``, repeated GRANTs).
"""

from alembic import op
from controller.store.migrations.shapes import separate_role

revision: str = "0006"
down_revision: str | None = "0005"

CHAIN_LOCK = 0x6D706A6361756474  # controller.store.auditchain.CHAIN_LOCK
PURGE_FUNCTION = """
CREATE OR REPLACE FUNCTION audit_purge(
    p_before timestamptz, p_upto bigint, p_recorded_at timestamptz, p_record jsonb, p_hash text
) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = {schema}, pg_temp AS $$
DECLARE
    n bigint; f bigint; l bigint; oldest timestamptz; newest timestamptz;
    last_hash text; head_seq bigint; head_hash text;
    s jsonb := p_record -> 'purge';
BEGIN
    IF p_before > now() - interval '1 day' THEN
        RAISE EXCEPTION 'audit_purge: cutoff % is less than a day ago', p_before
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM pg_advisory_xact_lock({lock});
    IF EXISTS (SELECT 1 FROM audit_records WHERE seq <= p_upto AND recorded_at >= p_before) THEN
        RAISE EXCEPTION 'audit_purge: records up to seq % include some recorded after %', p_upto, p_before
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT count(*), min(seq), max(seq), min(recorded_at), max(recorded_at)
        INTO n, f, l, oldest, newest FROM audit_records WHERE seq <= p_upto;
    IF n = 0 THEN
        RAISE EXCEPTION 'audit_purge: nothing up to seq %', p_upto USING ERRCODE = 'no_data_found';
    END IF;
    SELECT hash INTO last_hash FROM audit_records WHERE seq = l;
    SELECT seq, hash INTO head_seq, head_hash FROM audit_records ORDER BY seq DESC LIMIT 1;
    IF p_record ->> 'verb' IS DISTINCT FROM 'purge'
        OR p_record ->> 'source' IS DISTINCT FROM 'retention'
        OR p_record ->> 'id' IS DISTINCT FROM format('purge/%s-%s', f, l)
        OR p_record ->> 'namespace' IS NOT NULL
        OR p_record ->> 'object' IS NOT NULL
        OR (s ->> 'first_seq')::bigint IS DISTINCT FROM f
        OR (s ->> 'last_seq')::bigint IS DISTINCT FROM l
        OR (s ->> 'removed')::bigint IS DISTINCT FROM n
        OR s ->> 'last_removed_hash' IS DISTINCT FROM last_hash
        OR (s ->> 'before')::timestamptz IS DISTINCT FROM p_before
        OR (s ->> 'oldest_recorded_at')::timestamptz IS DISTINCT FROM oldest
        OR (s ->> 'newest_recorded_at')::timestamptz IS DISTINCT FROM newest
    THEN
        RAISE EXCEPTION 'audit_purge: the purge record does not describe this purge (seq % to %)', f, l
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('mpijc.audit_purge', 'on', true);
    DELETE FROM audit_records WHERE seq <= p_upto;
    PERFORM set_config('mpijc.audit_purge', 'off', true);
    INSERT INTO audit_records (seq, event_id, recorded_at, at, namespace, source, verb, kind, name,
                               object_uid, username, record, prev_hash, hash)
    VALUES (head_seq + 1, p_record ->> 'id', p_recorded_at, (p_record ->> 'at')::timestamptz, NULL,
            'retention', 'purge', NULL, NULL, NULL, p_record -> 'actor' ->> 'username', p_record,
            head_hash, p_hash);
    RETURN head_seq + 1;
END
$$
"""
PURGE_SIGNATURE = "audit_purge(timestamptz, bigint, timestamptz, jsonb, text)"

ENSURE_ROLE = """
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') THEN
        IF NOT (SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user) THEN
            RAISE EXCEPTION 'role {role} does not exist and % may not create it: have an administrator run '
                'CREATE ROLE {role} LOGIN PASSWORD ''…'', or set MPIJC_DATABASE__RUNTIME_ROLE', current_user;
        END IF;
        CREATE ROLE {role} LOGIN;
    END IF;
END
$$
"""

TAKE_OWNERSHIP = """
DO $$
DECLARE item record;
BEGIN
    FOR item IN
        SELECT c.oid::regclass AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm')
          AND pg_get_userbyid(c.relowner) = '{role}'
    LOOP
        EXECUTE format('ALTER TABLE %s OWNER TO %I', item.name, current_user);
    END LOOP;
    FOR item IN
        SELECT p.oid::regprocedure AS name FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
        WHERE n.nspname = current_schema() AND pg_get_userbyid(p.proowner) = '{role}'
    LOOP
        EXECUTE format('ALTER FUNCTION %s OWNER TO %I', item.name, current_user);
    END LOOP;
END
$$
"""


TABLE_DML = "SELECT, INSERT, UPDATE, DELETE"
SEQUENCE_USE = "USAGE, SELECT, UPDATE"


def grants(role: str, schema: str) -> list[str]:
    """What the runtime role may do: everything it needs, and on the audit table only read and append."""
    return [
        f"GRANT USAGE ON SCHEMA {schema} TO {role}",
        f"REVOKE CREATE ON SCHEMA {schema} FROM {role}",
        f"GRANT {TABLE_DML} ON ALL TABLES IN SCHEMA {schema} TO {role}",
        f"GRANT {SEQUENCE_USE} ON ALL SEQUENCES IN SCHEMA {schema} TO {role}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT {TABLE_DML} ON TABLES TO {role}",
        f"ALTER DEFAULT PRIVILEGES IN SCHEMA {schema} GRANT {SEQUENCE_USE} ON SEQUENCES TO {role}",
        f"REVOKE ALL ON audit_records FROM PUBLIC, {role}",
        f"GRANT SELECT, INSERT ON audit_records TO {role}",
        f"REVOKE ALL ON alembic_version FROM PUBLIC, {role}",
        f"GRANT SELECT ON alembic_version TO {role}",
        f"REVOKE ALL ON FUNCTION {PURGE_SIGNATURE} FROM PUBLIC",
        f"GRANT EXECUTE ON FUNCTION {PURGE_SIGNATURE} TO {role}",
    ]


def upgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT quote_ident(current_schema())").scalar_one()
    role = separate_role()
    op.execute(PURGE_FUNCTION.format(schema=schema, lock=CHAIN_LOCK))
    if role is None:  # single-role mode: the owner is the runtime role; nothing to separate
        return
    op.execute(ENSURE_ROLE.format(role=role))
    op.execute(TAKE_OWNERSHIP.format(role=role))
    for statement in grants(role, schema):
        op.execute(statement)


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {PURGE_SIGNATURE}")
