"""Retention removes old records only through the purge, which records itself; the chain still verifies."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.audit.consumer import RETENTION_ACTOR, run_retention
from controller.contract.audit import Actor
from controller.contract.settings import AuditSettings
from controller.store.auditchain import AuditFilter, claim_cursor, list_records, move_cursor, purge
from controller.store.auditverification import verify
from tests.audit_helpers import T0, audit_record, write, write_aged_history

OPERATOR = Actor(username="ops@example.com", groups=("platform-admins",))
DAY = timedelta(days=1)


async def test_purge_removes_old_records_and_leaves_a_record_of_it(engine: AsyncEngine) -> None:
    await write_aged_history(engine)
    async with engine.begin() as conn:
        result = await purge(conn, 30, OPERATOR, T0)

    assert result.removed == 3 and result.record is not None
    stored = result.record
    assert stored.seq == 7
    record = stored.record
    assert (record.verb, record.source, record.namespace, record.actor) == (
        "purge",
        "retention",
        None,
        OPERATOR,
    )
    assert record.purge is not None
    assert (record.purge.first_seq, record.purge.last_seq, record.purge.removed) == (1, 3, 3)
    assert record.purge.before == T0 - 30 * DAY
    assert record.purge.oldest_recorded_at == record.purge.newest_recorded_at == T0 - 40 * DAY
    assert record.message == "removed 3 records (seq 1 to 3) recorded before 2026-10-24T09:00:00.000000+00:00"

    async with engine.connect() as conn:
        left = [s.seq for s in await list_records(conn, AuditFilter(), 100)]
    assert left == [7, 6, 5, 4]
    result_of_verify = await verify(engine)
    assert result_of_verify.ok, result_of_verify.broken
    assert (result_of_verify.anchor, result_of_verify.first_seq, result_of_verify.checked) == (
        "purge record 7",
        4,
        4,
    )


async def test_purge_states_the_hash_of_the_last_removed_record(engine: AsyncEngine) -> None:
    links = await write(engine, [audit_record(n) for n in (1, 2, 3)], T0 - 40 * DAY)
    async with engine.begin() as conn:
        result = await purge(conn, 30, OPERATOR, T0)
    assert result.record is not None and result.record.record.purge is not None
    assert result.record.record.purge.last_removed_hash == links[-1].hash
    assert result.record.prev_hash == links[-1].hash, "the purge record continues the chain"
    assert (await verify(engine)).ok


async def test_a_second_purge_is_anchored_by_its_own_record(engine: AsyncEngine) -> None:
    await write_aged_history(engine)
    async with engine.begin() as conn:
        await purge(conn, 30, OPERATOR, T0)
    async with engine.begin() as conn:
        second = await purge(conn, 30, OPERATOR, T0 + 15 * DAY)

    assert second.record is not None and second.record.record.purge is not None
    assert (second.record.record.purge.first_seq, second.record.record.purge.last_seq) == (4, 5)
    result = await verify(engine)
    assert result.ok, result.broken
    assert result.anchor == f"purge record {second.record.seq}"


async def test_nothing_due_records_nothing(engine: AsyncEngine) -> None:
    await write(engine, [audit_record(1)], T0)
    async with engine.begin() as conn:
        result = await purge(conn, 30, OPERATOR, T0)
    assert (result.removed, result.record) == (0, None)
    assert (await verify(engine)).checked == 1


async def test_purge_keeps_what_an_exporter_has_not_shipped(engine: AsyncEngine) -> None:
    await write_aged_history(engine)
    async with engine.begin() as conn:
        await claim_cursor(conn, "syslog:siem:6514")
        await move_cursor(conn, "syslog:siem:6514", 2, 2, T0)

    async with engine.begin() as conn:
        result = await purge(conn, 30, OPERATOR, T0)

    assert result.removed == 2
    assert result.held_back_by == {"syslog:siem:6514": 2}
    assert (await verify(engine)).ok


async def test_a_failed_purge_removes_nothing(engine: AsyncEngine) -> None:
    await write_aged_history(engine)
    with pytest.raises(RuntimeError, match="crash"):
        async with engine.begin() as conn:
            await purge(conn, 30, OPERATOR, T0)
            raise RuntimeError("crash before commit")
    async with engine.connect() as conn:
        assert len(await list_records(conn, AuditFilter(), 100)) == 6


async def test_deleting_outside_the_purge_is_refused_and_a_forged_purge_is_detected(
    engine: AsyncEngine, database_url: str
) -> None:
    await write_aged_history(engine)
    async with engine.begin() as conn:
        await purge(conn, 30, OPERATOR, T0)
    db = await asyncpg.connect(database_url)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await db.execute("DELETE FROM audit_records WHERE seq = 4")
        await db.execute("ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only")
        await db.execute("DELETE FROM audit_records WHERE seq = 4")
    finally:
        await db.close()

    result = await verify(engine)
    assert result.broken is not None
    assert result.broken.seq == 5
    assert "records 1 to 4 are missing and no purge record accounts for them" in result.broken.reason


async def test_scheduled_retention_purges_as_the_controller(engine: AsyncEngine) -> None:
    await write_aged_history(engine)
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_retention(engine, AuditSettings(retention_days=30, purge_interval_s=60), stop, lambda: T0)
    )
    for _ in range(200):
        async with engine.connect() as conn:
            purged = (
                await conn.execute(text("SELECT count(*) FROM audit_records WHERE verb = 'purge'"))
            ).scalar()
        if purged:
            break
        await asyncio.sleep(0.01)
    stop.set()
    await task
    async with engine.connect() as conn:
        (link,) = await list_records(conn, AuditFilter(verb="purge"), 1)
    assert link.record.actor == RETENTION_ACTOR
    assert (await verify(engine)).ok
