"""A claim leases a row without writing an index entry (a HOT update: ``leased_until`` is in no
index, the table leaves room on its pages), and the lease still works: a leased row is not
claimed again until its lease runs out, a retry comes due at its own time and not at the
lease's end, the queue depth counts a leased row only once its lease has run out. A job's
events enqueued together are written once each, the later ones parked from the start, and a
row guessed parked behind one that was already there and settled is due."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from controller.store import outbox
from controller.store.outbox import Outcome
from tests.notify_fixtures import enqueued, outbox_row

NOW = datetime.now(UTC)
LEASE = timedelta(minutes=2)


def row(subscription_id: str, job_uid: str, event: str) -> dict[str, Any]:
    """An outbox row as the notify consumer writes it, its body naming the job."""
    return outbox_row(
        subscription_id, job_uid, event, NOW, {"type": event, "data": {"job": {"uid": job_uid}}}
    )


async def written(conn: AsyncConnection) -> tuple[int, int]:
    """This transaction's updates of outbox rows so far, and how many of them were HOT."""
    updated, hot = (
        await conn.execute(
            text(
                "SELECT pg_stat_get_xact_tuples_updated('deliveries'::regclass),"
                " pg_stat_get_xact_tuples_hot_updated('deliveries'::regclass)"
            )
        )
    ).one()
    return int(updated), int(hot)


async def claimed(engine: AsyncEngine, at: datetime) -> list[tuple[str, str]]:
    async with engine.begin() as conn:
        return [(c.order_key, c.event_type) for c in await outbox.claim(conn, at, at + LEASE, 100, 100)]


async def test_a_claim_is_a_hot_update_and_its_lease_holds_until_it_runs_out(
    subscription: str, engine: AsyncEngine
) -> None:
    sub = subscription
    await enqueued(engine, [row(sub, f"job-{n}", "job.created") for n in range(50)])
    async with engine.begin() as conn:
        claims = await outbox.claim(conn, NOW, NOW + LEASE, 100, 100)
        assert len(claims) == 50
        assert await written(conn) == (50, 50), "every lease a HOT update: no index entry written"

    assert await claimed(engine, NOW + LEASE / 2) == [], "leased: no other claim takes them"
    async with engine.connect() as conn:
        assert await outbox.pending_count(conn, due_by=NOW + LEASE / 2) == 0
        assert await outbox.pending_count(conn, due_by=NOW + LEASE) == 50

    retry_at = NOW + timedelta(seconds=10)  # well before the lease ends
    async with engine.begin() as conn:
        await outbox.record(
            conn,
            [Outcome(claims[0].seq, sub, 1, NOW, "retry", order_key="job-0", next_attempt_at=retry_at)],
            NOW,
            timedelta(days=5),
        )
    assert await claimed(engine, retry_at) == [("job-0", "job.created")], "due at its retry time"
    assert len(await claimed(engine, NOW + LEASE)) == 49, "the others once their lease ran out"


async def test_a_jobs_events_enqueued_together_are_each_written_once(
    subscription: str, engine: AsyncEngine
) -> None:
    sub = subscription
    events = ("job.created", "job.running", "job.succeeded")
    async with engine.begin() as conn:
        await outbox.enqueue(conn, [row(sub, "pi", e) for e in events] + [row(sub, "other", "job.created")])
        assert await written(conn) == (0, 0), "inserted parked: no second write of a row"
    assert await claimed(engine, NOW) == [("pi", "job.created"), ("other", "job.created")]


async def test_a_row_guessed_parked_behind_one_already_settled_is_due(
    subscription: str, engine: AsyncEngine
) -> None:
    sub = subscription
    await enqueued(engine, [row(sub, "pi", "job.created")])
    async with engine.begin() as conn:  # delivered: the consumer's redelivered batch repeats it
        await conn.execute(text("UPDATE deliveries SET status = 'delivered'"))
    new = await enqueued(engine, [row(sub, "pi", "job.created"), row(sub, "pi", "job.running")])
    assert new == {row(sub, "pi", "job.running")["id"]}
    assert await claimed(engine, NOW) == [("pi", "job.running")]
