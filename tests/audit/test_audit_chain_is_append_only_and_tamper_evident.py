"""The audit table refuses changes, chains every record, and verification names the first broken one.

Tampering is done the only way left once the trigger refuses: as a superuser with the
trigger disabled, straight in SQL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.store.auditchain import GENESIS, StoredRecord, append, canonical_json, chain_hash
from controller.store.auditverification import verify
from tests.audit_helpers import T0, audit_record, write


async def test_records_are_chained_in_order_and_appended_once(engine: AsyncEngine) -> None:
    first = await write(engine, [audit_record(1), audit_record(2)])
    again = await write(engine, [audit_record(2), audit_record(3), audit_record(3)])

    assert [s.seq for s in first] == [1, 2]
    assert [s.seq for s in again] == [3], "a known id is not appended again, nor a repeat within a batch"
    assert first[0].prev_hash == GENESIS
    assert first[1].prev_hash == first[0].hash and again[0].prev_hash == first[1].hash
    result = await verify(engine)
    assert (result.ok, result.checked, result.first_seq, result.last_seq) == (True, 3, 1, 3)
    assert result.head_hash == again[0].hash and result.anchor == "genesis"
    assert result.describe() == f"ok: 3 records, seq 1 to 3, anchored at genesis; head {again[0].hash}"


def test_the_hash_is_sha256_of_the_exported_link_without_its_hash() -> None:
    """What docs/audit.md tells a third party to recompute."""
    import hashlib

    link = audit_record(1).model_dump(mode="json")
    digest = chain_hash(1, GENESIS, T0, link)
    exported = StoredRecord(1, T0, GENESIS, digest, link).export()
    del exported["hash"]
    assert hashlib.sha256(canonical_json(exported)).hexdigest() == digest
    assert canonical_json(exported).startswith(b'{"prev_hash":"0000')


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE audit_records SET username = 'mallory' WHERE seq = 1",
        "DELETE FROM audit_records WHERE seq = 1",
        "TRUNCATE audit_records",
    ],
    ids=["update", "delete", "truncate"],
)
async def test_the_table_refuses_changes(engine: AsyncEngine, statement: str) -> None:
    await write(engine, [audit_record(1)])
    with pytest.raises(DBAPIError, match="append-only"):
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    assert (await verify(engine)).checked == 1


async def test_the_purge_flag_never_allows_an_update(engine: AsyncEngine) -> None:
    await write(engine, [audit_record(1)])
    with pytest.raises(DBAPIError, match="UPDATE refused"):
        async with engine.begin() as conn:
            await conn.execute(text("SELECT set_config('mpijc.audit_purge', 'on', true)"))
            await conn.execute(text("UPDATE audit_records SET username = 'mallory'"))


Tamper = Callable[[asyncpg.Connection, list[StoredRecord]], Awaitable[object]]


async def _change_content(db: asyncpg.Connection, links: list[StoredRecord]) -> None:
    record = dict(links[2].raw, outcome="denied")
    await db.execute("UPDATE audit_records SET record = $1::jsonb WHERE seq = 3", json.dumps(record))


async def _change_and_rehash(db: asyncpg.Connection, links: list[StoredRecord]) -> None:
    record = dict(links[2].raw, outcome="denied")
    digest = chain_hash(3, links[2].prev_hash, links[2].recorded_at, record)
    await db.execute(
        "UPDATE audit_records SET record = $1::jsonb, hash = $2 WHERE seq = 3", json.dumps(record), digest
    )


async def _hide_from_a_filter(db: asyncpg.Connection, links: list[StoredRecord]) -> None:
    await db.execute("UPDATE audit_records SET namespace = 'kube-system' WHERE seq = 3")


async def _remove_one(db: asyncpg.Connection, links: list[StoredRecord]) -> None:
    await db.execute("DELETE FROM audit_records WHERE seq = 3")


async def _remove_the_oldest(db: asyncpg.Connection, links: list[StoredRecord]) -> None:
    await db.execute("DELETE FROM audit_records WHERE seq <= 2")


async def _swap_two(db: asyncpg.Connection, links: list[StoredRecord]) -> None:
    await db.execute("UPDATE audit_records SET seq = -seq WHERE seq IN (3, 4)")
    await db.execute("UPDATE audit_records SET seq = 7 - (-seq) WHERE seq < 0")


@pytest.mark.parametrize(
    ("tamper", "broken_seq", "reason"),
    [
        (_change_content, 3, "does not match its hash"),
        (_change_and_rehash, 4, "does not match"),
        (_hide_from_a_filter, 3, "column namespace says 'kube-system'"),
        (_remove_one, 4, "records 3 to 3 are missing"),
        (_remove_the_oldest, 3, "no purge record accounts for them"),
        (_swap_two, 3, "does not match"),
    ],
    ids=["changed", "changed-and-rehashed", "column-changed", "one-removed", "oldest-removed", "reordered"],
)
async def test_verify_points_at_the_first_broken_record(
    engine: AsyncEngine, database_url: str, tamper: Tamper, broken_seq: int, reason: str
) -> None:
    links = await write(engine, [audit_record(n) for n in range(1, 7)])
    db = await asyncpg.connect(database_url)
    try:
        await db.execute("ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only")
        await tamper(db, links)
        await db.execute("ALTER TABLE audit_records ENABLE TRIGGER audit_records_append_only")
    finally:
        await db.close()

    result = await verify(engine, page=2)  # small pages: the walk crosses page boundaries
    assert not result.ok
    assert result.broken is not None
    assert result.broken.seq == broken_seq, result.broken
    assert reason in result.broken.reason
    assert result.describe().startswith(f"BROKEN at seq {broken_seq}: ")


async def test_concurrent_writers_keep_one_gapless_chain(engine: AsyncEngine) -> None:
    async def writer(w: int) -> None:
        for batch in range(5):
            async with engine.begin() as conn:
                await append(conn, [audit_record(w * 100 + batch * 10 + i) for i in range(3)], T0)

    await asyncio.gather(*(writer(w) for w in range(4)))

    result = await verify(engine)
    assert (result.ok, result.checked, result.last_seq) == (True, 60, 60)
