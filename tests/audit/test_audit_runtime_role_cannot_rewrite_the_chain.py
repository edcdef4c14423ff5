"""The runtime role may only read and append audit records; purging goes through the owner's
function; what a more powerful role does anyway shows against the SIEM's copy.

The test databases are migrated by the admin role (the owner), which grants ``mpijc_runtime``
(migration 0007); these tests connect as ``mpijc_runtime`` and try every way of rewriting the
chain the security finding listed.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.audit.export import JsonlFileSink, drain
from controller.contract.audit import Actor, AuditRecord, PurgeSummary
from controller.store.auditchain import AuditFilter, append, chain_hash, list_records, purge
from controller.store.auditformats import jsonl_line
from controller.store.auditverification import compare_with_export, verify
from controller.store.engine import engine_at
from controller.testing.processes import run_cli
from tests.audit_helpers import T0, audit_record, connected, write, write_aged_history

RUNTIME_ROLE = "mpijc_runtime"
PASSWORD = "mpijc-runtime-test"
OPERATOR = Actor(username="ops@example.com")
DAY = timedelta(days=1)


def _as(url: str, user: str, password: str) -> str:
    return make_url(url).set(username=user, password=password).render_as_string(hide_password=False)


@pytest.fixture
async def runtime_url(database_url: str) -> str:
    """This test's database, as the runtime role (the migration created and granted it)."""
    async with connected(database_url) as admin:
        await admin.execute(f"ALTER ROLE {RUNTIME_ROLE} LOGIN PASSWORD '{PASSWORD}'")
    return _as(database_url, RUNTIME_ROLE, PASSWORD)


@pytest.fixture
async def runtime_engine(runtime_url: str) -> AsyncIterator[AsyncEngine]:
    async with engine_at(runtime_url) as engine:
        yield engine


@pytest.fixture
async def runtime_db(runtime_url: str) -> AsyncIterator[asyncpg.Connection]:
    async with connected(runtime_url) as db:
        yield db


async def _cut(database_url: str, where: str) -> None:
    """Delete the audit records ``where`` names, as an owner who turns the append-only trigger off."""
    async with connected(database_url) as admin:
        await admin.execute("ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only")
        await admin.execute(f"DELETE FROM audit_records WHERE {where}")


async def test_the_runtime_role_appends_reads_verifies_and_purges(runtime_engine: AsyncEngine) -> None:
    await write_aged_history(runtime_engine)
    async with runtime_engine.begin() as conn:
        result = await purge(conn, 30, OPERATOR, T0)
    assert result.removed == 3 and result.record is not None and result.record.seq == 7
    outcome = await verify(runtime_engine)
    assert outcome.ok, outcome.broken
    assert outcome.anchor == "purge record 7"


async def test_the_runtime_role_cannot_own_or_change_anything_of_the_audit_table(
    runtime_engine: AsyncEngine, runtime_db: asyncpg.Connection
) -> None:
    await write_aged_history(runtime_engine)
    attempts = {
        "disable the trigger": "ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only",
        "disable all triggers": "ALTER TABLE audit_records DISABLE TRIGGER ALL",
        "drop the trigger": "DROP TRIGGER audit_records_append_only ON audit_records",
        "update a record": 'UPDATE audit_records SET record = record || \'{"verb": "update"}\' WHERE seq = 2',
        "recompute a hash": "UPDATE audit_records SET hash = repeat('0', 64) WHERE seq = 6",
        "delete the newest": "DELETE FROM audit_records WHERE seq >= 5",
        "truncate": "TRUNCATE audit_records",
        "alter the table": "ALTER TABLE audit_records ADD COLUMN note text",
        "give it away": f"ALTER TABLE audit_records OWNER TO {RUNTIME_ROLE}",
        "drop the table": "DROP TABLE audit_records",
        "replace the trigger function": (
            "CREATE OR REPLACE FUNCTION audit_records_append_only() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$"
        ),
        "replace the purge function": (
            "CREATE OR REPLACE FUNCTION audit_purge(timestamptz, bigint, timestamptz, jsonb, text) "
            "RETURNS bigint LANGUAGE sql AS $$ SELECT 0::bigint $$"
        ),
        "shadow the table in its own schema": "CREATE SCHEMA shadow",
    }
    for what, statement in attempts.items():
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await runtime_db.execute(statement)
            pytest.fail(f"{what}: allowed")
    # granting itself more is a no-op with a warning, not an error: check it has nothing more
    await runtime_db.execute(f"GRANT UPDATE, DELETE, TRUNCATE ON audit_records TO {RUNTIME_ROLE}")
    for privilege in ("UPDATE", "DELETE", "TRUNCATE", "TRIGGER", "REFERENCES"):
        assert not await runtime_db.fetchval(
            "SELECT has_table_privilege(current_user, 'audit_records', $1)", privilege
        ), privilege
    async with runtime_db.transaction():  # flip the purge flag, then delete: still no DELETE privilege
        await runtime_db.execute("SELECT set_config('mpijc.audit_purge', 'on', true)")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            await runtime_db.execute("DELETE FROM audit_records WHERE seq >= 5")
    count = await runtime_db.fetchval("SELECT count(*) FROM audit_records")
    assert count == 6
    assert (await verify(runtime_engine)).ok


async def test_the_purge_function_removes_only_an_old_prefix_it_records_truthfully(
    runtime_engine: AsyncEngine, runtime_db: asyncpg.Connection
) -> None:
    await write_aged_history(runtime_engine)
    now = datetime.now(UTC)
    await write(runtime_engine, [audit_record(7)], now)
    async with runtime_engine.connect() as conn:
        links = {s.seq: s for s in await list_records(conn, AuditFilter(), 100)}
    honest = {
        **json.loads(jsonl_line(links[1]))["record"],
        "id": "purge/1-3",
        "source": "retention",
        "verb": "purge",
        "namespace": None,
        "object": None,
        "purge": {
            "retention_days": 30,
            "before": (T0 - 30 * DAY).isoformat(),
            "removed": 3,
            "first_seq": 1,
            "last_seq": 3,
            "last_removed_hash": links[3].hash,
            "oldest_recorded_at": (T0 - 40 * DAY).isoformat(),
            "newest_recorded_at": (T0 - 40 * DAY).isoformat(),
        },
    }
    call = "SELECT audit_purge($1, $2, $3, $4::jsonb, $5)"
    # the newest records: recorded after any cutoff at least a day old
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="less than a day ago"):
        await runtime_db.fetchval(call, now, 7, now, json.dumps(honest), "0" * 64)
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="recorded after"):
        await runtime_db.fetchval(call, T0 - 30 * DAY, 7, now, json.dumps(honest), "0" * 64)
    # a purge record that hides what was removed
    lying = {**honest, "purge": {**honest["purge"], "removed": 1, "last_seq": 1}}
    with pytest.raises(asyncpg.InsufficientPrivilegeError, match="does not describe this purge"):
        await runtime_db.fetchval(call, T0 - 30 * DAY, 3, now, json.dumps(lying), "0" * 64)
    assert await runtime_db.fetchval("SELECT count(*) FROM audit_records") == 7
    # the honest one goes through; a wrong hash on it would be verify's to find
    seq = await runtime_db.fetchval(call, T0 - 30 * DAY, 3, now, json.dumps(honest), "0" * 64)
    assert seq == 8
    outcome = await verify(runtime_engine)
    assert outcome.broken is not None and outcome.broken.seq == 8
    assert "does not match its hash" in outcome.broken.reason


async def _export(engine: AsyncEngine, path: Path) -> int:
    return await drain(engine, JsonlFileSink(path), 100)


async def test_removing_the_newest_records_is_detected_against_the_siem_copy(
    engine: AsyncEngine, runtime_engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    """A role that can disable the trigger (a superuser) deletes the newest records: the chain
    that is left verifies, but the SIEM holds them and the chain head it was told."""
    path = tmp_path / "siem.jsonl"
    await write(runtime_engine, [audit_record(n) for n in (1, 2, 3, 4, 5)], T0)
    assert await _export(runtime_engine, path) == 5
    await write(runtime_engine, [audit_record(n) for n in (6, 7)], T0)
    assert await _export(runtime_engine, path) == 2
    lines = path.read_bytes().splitlines()
    assert json.loads(lines[-1])["head"] == {"seq": 7, "hash": json.loads(lines[-1])["hash"]}
    assert (await compare_with_export(runtime_engine, lines)).ok

    await _cut(database_url, "seq >= 6")

    assert (await verify(runtime_engine)).ok, "a clean cut at the end leaves a consistent chain"
    compared = await compare_with_export(runtime_engine, lines)
    assert not compared.ok
    assert compared.missing == [6, 7]
    assert compared.head_problem is not None and "reached seq 7" in compared.head_problem
    assert "ends at seq 5" in compared.head_problem
    assert "gone from the database: seq 6-7" in compared.describe()


async def test_the_head_checkpoint_reveals_records_removed_before_they_were_shipped(
    engine: AsyncEngine, runtime_engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "siem.jsonl"
    await write(runtime_engine, [audit_record(n) for n in (1, 2, 3, 4)], T0)
    assert await drain(runtime_engine, JsonlFileSink(path), 2) == 4  # head seq 4 with every batch
    await _cut(database_url, "seq = 4")
    lines = path.read_bytes().splitlines()[:2]  # the SIEM got only the first batch (seq 1, 2)
    compared = await compare_with_export(runtime_engine, lines)
    assert compared.missing == []
    assert compared.head is not None and compared.head.seq == 4
    assert compared.head_problem is not None and "the newest records were removed" in compared.head_problem


async def test_a_rewritten_and_rehashed_chain_is_detected_against_the_siem_copy(
    engine: AsyncEngine, runtime_engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "siem.jsonl"
    await write(runtime_engine, [audit_record(n) for n in (1, 2, 3)], T0)
    await _export(runtime_engine, path)
    # change record 2 and recompute every hash after it: verify cannot tell
    async with connected(database_url) as admin:
        await admin.execute("ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only")
        rows = await admin.fetch("SELECT seq, recorded_at, prev_hash, record FROM audit_records ORDER BY seq")
        prev = rows[0]["prev_hash"]
        for row in rows:
            record = json.loads(row["record"])
            if row["seq"] == 2:
                record["actor"]["username"] = "someone-else@example.com"
            digest = chain_hash(row["seq"], prev, row["recorded_at"], record)
            await admin.execute(
                "UPDATE audit_records SET record = $2::jsonb, prev_hash = $3, hash = $4, username = $5 "
                "WHERE seq = $1",
                row["seq"],
                json.dumps(record),
                prev,
                digest,
                record["actor"]["username"],
            )
            prev = digest
    assert (await verify(runtime_engine)).ok
    compared = await compare_with_export(runtime_engine, path.read_bytes().splitlines())
    assert compared.changed == [2, 3]
    assert compared.head_problem is not None and "different hash" in compared.head_problem


async def test_purged_records_are_excused_once_the_siem_has_the_purge_record(
    runtime_engine: AsyncEngine, tmp_path: Path
) -> None:
    path = tmp_path / "siem.jsonl"
    await write_aged_history(runtime_engine)
    await _export(runtime_engine, path)
    async with runtime_engine.begin() as conn:
        done = await purge(conn, 30, OPERATOR, T0)
    assert done.record is not None and done.record.seq == 7

    lagging = await compare_with_export(runtime_engine, path.read_bytes().splitlines())
    assert not lagging.ok and lagging.missing == [], lagging.describe()
    assert lagging.unverified == [1, 2, 3] and lagging.unconfirmed_purges == [7]
    assert "accounted for only by purge record seq 7, which the SIEM has not received" in lagging.describe()

    await _export(runtime_engine, path)  # the SIEM receives the purge record
    compared = await compare_with_export(runtime_engine, path.read_bytes().splitlines())
    assert compared.ok, compared.describe()


async def test_a_purge_record_written_over_a_cut_tail_excuses_nothing(
    engine: AsyncEngine, runtime_engine: AsyncEngine, database_url: str, tmp_path: Path
) -> None:
    """Whoever can write the table cuts the newest records and appends, where they were, a purge
    record claiming them; the SIEM, lagging, has seen them only in the chain head it was told."""
    path = tmp_path / "siem.jsonl"
    kept = await write(runtime_engine, [audit_record(n) for n in (1, 2, 3, 4)], T0)
    assert await drain(runtime_engine, JsonlFileSink(path), 2) == 4  # head seq 4 with every batch
    lines = path.read_bytes().splitlines()[:2]  # the SIEM got only the first batch (seq 1, 2)
    await _cut(database_url, "seq >= 3")
    forged = AuditRecord(
        id="purge/3-4", source="retention", verb="purge", at=T0, namespace=None, actor=OPERATOR,
        outcome="removed", message="removed 2 records",
        purge=PurgeSummary(
            retention_days=1, before=T0, removed=2, first_seq=3, last_seq=4, last_removed_hash=kept[3].hash,
            oldest_recorded_at=T0, newest_recorded_at=T0,
        ),
    )  # fmt: skip
    async with engine.begin() as conn:
        (appended,) = await append(conn, [forged], T0)
    assert appended.seq == 3 and (await verify(runtime_engine)).ok, "the chain alone cannot tell"

    compared = await compare_with_export(runtime_engine, lines)
    assert not compared.ok
    assert compared.head_problem is not None and "the newest records were removed" in compared.head_problem


async def test_a_seq_beyond_bigint_in_the_export_is_an_unreadable_line_not_a_crash(
    runtime_engine: AsyncEngine,
) -> None:
    (link,) = await write(runtime_engine, [audit_record(1)], T0)
    good = jsonl_line(link)
    huge = json.dumps({"seq": 1, "hash": link.hash, "head": {"seq": 2**63, "hash": "b" * 64}})
    compared = await compare_with_export(
        runtime_engine, [good, huge, json.dumps({"seq": 2**64, "hash": "c"})]
    )
    assert compared.unreadable == [2, 3] and compared.missing == [] and compared.head_problem is None
    assert "2 lines are not exported audit records: line 2-3" in compared.describe()


def test_audit_verify_against_exits_1_when_the_siem_saw_more(database_url: str, tmp_path: Path) -> None:
    export = tmp_path / "siem.jsonl"
    export.write_text(json.dumps({"seq": 1, "hash": "a" * 64, "head": {"seq": 1, "hash": "a" * 64}}) + "\n")
    env = {
        **os.environ,
        "MPIJC_DATABASE__URL": database_url.replace("postgresql://", "postgresql+asyncpg://", 1),
        "MPIJC_DATABASE__MIGRATE": "false",
        "MPIJC_DATABASE__SINGLE_ROLE": "true",  # the test's database is the superuser's
    }
    result = run_cli(["audit", "verify", "--against", str(export)], env)
    assert result.returncode == 1, result.stderr
    assert "the audit chain is empty" in result.stdout
    assert "gone from the database: seq 1" in result.stdout
