"""A timeline entry that commits after one with a higher id is still handed on, in its turn: the
live streams hold entries back while a transaction that may still write below them is open."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import insert, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from controller.store.livefeed import TimelineTail, XidSnapshot
from controller.store.models import TimelineEntryRow

UID = "run-1"


def _entry(key: str) -> dict[str, Any]:
    return {
        "run_uid": UID,
        "at": datetime(2026, 11, 20, tzinfo=UTC),
        "source": "job",
        "summary": key,
        "detail": {},
        "dedup_key": key,
    }


async def _write(conn: AsyncConnection, key: str) -> int:
    await conn.execute(text("SELECT pg_current_xact_id()"))  # holds a transaction id, as history writes do
    return int(
        (
            await conn.execute(insert(TimelineEntryRow).returning(TimelineEntryRow.id), [_entry(key)])
        ).scalar_one()
    )


async def test_an_entry_committed_late_under_a_lower_id_is_handed_on_before_those_above_it(
    engine: AsyncEngine,
) -> None:
    tail = TimelineTail(UID)
    async with engine.connect() as slow:
        await slow.begin()
        low = await _write(slow, "slow")
        async with engine.begin() as fast:
            high = await _write(fast, "fast")
        assert low < high
        held = await tail.poll(engine)  # "fast" is visible, but "slow" may still commit below it
        assert (held.entries, held.settled) == ([], False)
        await slow.commit()
    ready = await tail.poll(engine)
    assert [(e.id, e.summary) for e in ready.entries] == [(low, "slow"), (high, "fast")]
    assert ready.settled and tail.cursor == high
    assert (await tail.poll(engine)).entries == []  # each handed on once


async def test_entries_are_handed_on_at_once_when_no_transaction_is_writing(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        first = await _write(conn, "one")
        second = await _write(conn, "two")
    tail = TimelineTail(UID, cursor=first)  # resuming after the first, as Last-Event-ID does
    poll = await tail.poll(engine)
    assert [e.id for e in poll.entries] == [second]


def test_a_snapshot_tells_which_earlier_transactions_have_ended() -> None:
    now = XidSnapshot.parse("100:110:103,107")
    assert now.ended(frozenset({99, 105}))
    assert not now.ended(frozenset({103}))
    assert not now.ended(frozenset({112}))  # not even started as far as this snapshot knows
