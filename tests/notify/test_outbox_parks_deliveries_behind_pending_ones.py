"""A delivery queued behind a pending one of the same job and subscription is parked — never
scanned by a claim — and becomes due when the one ahead settles (delivered or dead), not when
it is retried; a row parked as the row ahead settled in another transaction is freed by the
dispatcher's sweep; re-enabling a subscription leaves parked rows parked; a claim skips the
rows another dispatcher is claiming at that moment instead of waiting for its transaction; a
batch of outcomes frees only what its finished rows held back; a claim reads the due index in
order."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.metrics import PipelineMetrics
from controller.store import outbox
from controller.store.outbox import AttemptResult, Outcome
from controller.testing.notify import api_client, dispatcher_running, log_of, subscribe, with_notify
from controller.testing.receivers import Receiver
from tests.notify_fixtures import enqueued, outbox_row

NOW = datetime.now(UTC)


def row(subscription_id: str, job_uid: str, event: str) -> dict[str, Any]:
    return outbox_row(subscription_id, job_uid, event, NOW)


async def claims(engine: AsyncEngine, at: datetime = NOW) -> list[outbox.Claim]:
    """What a claim takes at ``at``, leasing it for a minute."""
    async with engine.begin() as conn:
        return await outbox.claim(conn, at, at + timedelta(minutes=1), 100, 100)


async def claimable(engine: AsyncEngine, at: datetime = NOW) -> list[tuple[str, str]]:
    """What a claim takes now: (job uid, event type) per row, leasing them for a minute."""
    return [(c.order_key, c.event_type) for c in await claims(engine, at)]


async def settle(engine: AsyncEngine, sub: str, job_uid: str, event: str, result: str, **kw: Any) -> None:
    async with engine.begin() as conn:
        seq = (
            await conn.execute(
                text("SELECT seq FROM deliveries WHERE id = :id"), {"id": row(sub, job_uid, event)["id"]}
            )
        ).scalar_one()
        outcome = Outcome(
            seq=seq, subscription_id=sub, attempt=1, at=NOW, result=result, order_key=job_uid, **kw
        )  # type: ignore[arg-type]
        await outbox.record(conn, [outcome], NOW, timedelta(days=5))


async def test_rows_behind_a_pending_one_wait_parked_until_it_settles(
    subscription: str, settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    sub = subscription
    async with engine.begin() as conn:
        await outbox.enqueue(
            conn,
            [row(sub, "pi", "job.created"), row(sub, "pi", "job.running"), row(sub, "other", "job.created")],
        )
    async with engine.begin() as conn:  # a later batch queues behind the same pending row
        await outbox.enqueue(conn, [row(sub, "pi", "job.succeeded")])

    assert await claimable(engine) == [("pi", "job.created"), ("other", "job.created")]
    async with api_client(settings, engine, metrics) as api:
        waiting = {d["event_type"]: d for d in await log_of(api, sub) if d["job"]["uid"] == "pi"}
    assert waiting["job.running"]["status"] == "pending" and waiting["job.running"]["next_attempt_at"] is None
    assert waiting["job.created"]["next_attempt_at"] is not None  # leased: it has a time

    await settle(engine, sub, "other", "job.created", "delivered")
    await settle(engine, sub, "pi", "job.created", "delivered")
    assert await claimable(engine) == [("pi", "job.running")]  # only the next one, not the one after it

    await settle(engine, sub, "pi", "job.running", "retry", next_attempt_at=NOW + timedelta(hours=1))
    assert await claimable(engine) == []  # a retry holds the rest of the job back
    assert await claimable(engine, NOW + timedelta(hours=2)) == [("pi", "job.running")]

    await settle(engine, sub, "pi", "job.running", "failed")  # dead: the job's next event goes on
    assert await claimable(engine) == [("pi", "job.succeeded")]


async def test_a_row_parked_as_the_row_ahead_settled_elsewhere_is_freed_by_the_sweep(
    subscription: str, settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    sub = subscription
    await enqueued(engine, [row(sub, "pi", "job.created"), row(sub, "pi", "job.running")])
    async with engine.begin() as conn:  # settled by a transaction that never saw the parked row
        await conn.execute(
            text("UPDATE deliveries SET status = 'delivered' WHERE event_type = 'job.created'")
        )
    assert await claimable(engine) == []

    async with engine.begin() as conn:
        assert await outbox.unpark_heads(conn, NOW) == 1
        assert await outbox.unpark_heads(conn, NOW) == 0
    assert await claimable(engine) == [("pi", "job.running")]


async def test_what_is_due_counts_a_stranded_row_but_not_rows_behind_a_deferred_one(
    subscription: str, engine: AsyncEngine
) -> None:
    """The demo waits for what is due: a row stranded by the race is (the sweep sends it), while a
    job whose head is deferred past the horizon (a digest, a far retry) holds its parked rows back."""
    sub = subscription
    async with engine.begin() as conn:
        await outbox.enqueue(conn, [row(sub, "pi", "job.created"), row(sub, "pi", "job.running")])
        await outbox.enqueue(conn, [row(sub, "held", "job.created"), row(sub, "held", "job.failed")])
    await settle(engine, sub, "held", "job.created", "retry", next_attempt_at=NOW + timedelta(hours=1))
    async with engine.begin() as conn:
        await conn.execute(
            text("UPDATE deliveries SET status = 'delivered' WHERE id = :id"),
            {"id": row(sub, "pi", "job.created")["id"]},
        )
    async with engine.connect() as conn:
        assert await outbox.pending_count(conn) == 3
        assert await outbox.pending_count(conn, due_by=NOW + timedelta(minutes=1)) == 1  # pi's stranded row
        assert await outbox.pending_count(conn, due_by=NOW + timedelta(hours=2)) == 2  # and held's retry


async def test_the_dispatchers_sweep_sends_a_stranded_row(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings, queue_depth_interval_s=0.1, poll_interval_s=60)
    async with Receiver() as rx, api_client(settings, engine, metrics) as api:
        sub = str((await subscribe(api, rx, "ci"))["id"])
        async with engine.begin() as conn:
            await outbox.enqueue(conn, [row(sub, "pi", "job.created"), row(sub, "pi", "job.running")])
            await conn.execute(
                text("UPDATE deliveries SET status = 'delivered' WHERE event_type = 'job.created'")
            )
        async with dispatcher_running(settings, engine, metrics):
            (received,) = await rx.wait_for("ci", 1)
    assert received.payload == {"type": "job.running"} and received.verified


async def test_reenabling_a_subscription_leaves_parked_rows_parked(
    subscription: str, engine: AsyncEngine
) -> None:
    sub = subscription
    await enqueued(engine, [row(sub, "pi", "job.created"), row(sub, "pi", "job.running")])
    await settle(engine, sub, "pi", "job.created", "retry", next_attempt_at=NOW + timedelta(hours=1))
    async with engine.begin() as conn:
        await outbox.resume(conn, sub, NOW)
    assert await claimable(engine) == [("pi", "job.created")]


async def test_a_claim_skips_rows_another_dispatcher_is_claiming(
    subscription: str, engine: AsyncEngine
) -> None:
    sub = subscription
    await enqueued(engine, [row(sub, f"job-{n}", "job.created") for n in range(4)])
    async with engine.connect() as first, engine.begin() as second:
        await first.begin()
        held = await outbox.claim(first, NOW, NOW + timedelta(minutes=1), 2, 100)  # not committed yet
        await second.execute(text("SET LOCAL lock_timeout = '2s'"))  # waiting would fail, not hang
        taken = await outbox.claim(second, NOW, NOW + timedelta(minutes=1), 4, 100)
        await first.commit()
    assert [c.order_key for c in held] == ["job-0", "job-1"]
    assert [c.order_key for c in taken] == ["job-2", "job-3"]
    assert await claimable(engine) == []


async def test_a_batch_settles_at_once_and_frees_only_what_its_finished_rows_held_back(
    subscription: str, engine: AsyncEngine
) -> None:
    sub = subscription
    async with engine.begin() as conn:
        await outbox.enqueue(
            conn,
            [
                row(sub, "pi", "job.created"),
                row(sub, "pi", "job.running"),
                row(sub, "other", "job.created"),
                row(sub, "other", "job.running"),
                row(sub, "third", "job.created"),
                row(sub, "third", "job.running"),
                row(sub, "third", "job.succeeded"),
            ],
        )
    claimed = {c.order_key: c.seq for c in await claims(engine)}
    async with engine.begin() as conn:
        query = text("SELECT event_type || ':' || order_key, seq FROM deliveries")
        seqs: dict[str, int] = {key: seq for key, seq in await conn.execute(query)}
    later = NOW + timedelta(hours=1)

    def outcome(seq: int, key: str, result: AttemptResult, retry_at: datetime | None = None) -> Outcome:
        return Outcome(seq, sub, 1, NOW, result, order_key=key, next_attempt_at=retry_at)

    batch = [
        outcome(claimed["pi"], "pi", "delivered"),
        outcome(claimed["other"], "other", "retry", later),
        # the head of "third" is retried while a row behind it is settled dead in the same batch
        # (an email digest's row that cannot be composed): the head still holds the chain
        outcome(claimed["third"], "third", "retry", later),
        outcome(seqs["job.running:third"], "third", "failed"),
    ]
    async with engine.begin() as conn:
        recorded = await outbox.record(conn, batch, NOW, timedelta(days=5))
        logged = await outbox.attempts_of(conn, [o.seq for o in batch])

    assert recorded.freed == 1 and recorded.disabled == []
    assert {seq: [a.outcome for a in attempts] for seq, attempts in logged.items()} == {
        o.seq: [o.result] for o in batch
    }
    assert await claimable(engine) == [("pi", "job.running")]
    assert sorted(await claimable(engine, later + timedelta(minutes=1))) == [
        ("other", "job.created"),
        ("pi", "job.running"),  # its lease, taken just above, has run out
        ("third", "job.created"),  # job.succeeded stays parked behind it
    ]


async def test_a_claim_walks_the_due_index_in_order_past_dead_entries(
    subscription: str, engine: AsyncEngine
) -> None:
    """An index scan, not a bitmap scan: an index scan marks the entries of rows updated since
    (every claim and settle moves ``next_attempt_at``) dead as it passes them, so the next claim
    skips them; a bitmap scan visits their heap pages again on every claim until a vacuum."""
    sub = subscription
    async with engine.begin() as conn:  # an outbox as it runs: mostly settled, a few rows due
        await outbox.enqueue(conn, [row(sub, f"job-{n}", "job.created") for n in range(5000)])
        await conn.execute(text("UPDATE deliveries SET status = 'delivered' WHERE seq % 100 <> 0"))
    async with engine.connect() as conn:
        await conn.execute(text("ANALYZE deliveries"))
    async with engine.begin() as conn:
        await conn.execute(outbox._CUSTOM_PLAN)
        plan = "\n".join(
            line
            for (line,) in await conn.execute(
                text(f"EXPLAIN {outbox._CLAIM.text}"),
                {
                    "now": NOW,
                    "lease_until": NOW + timedelta(minutes=1),
                    "limit": 10,
                    "per_endpoint": 100,
                    "saturated": [],
                    "window": 40,
                },
            )
        )
    assert "Index Scan using ix_deliveries_due" in plan, plan
    assert "Bitmap" not in plan, plan


async def test_a_dispatcher_claims_again_when_a_settled_row_frees_the_next_and_only_then(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings, poll_interval_s=60, queue_depth_interval_s=60)  # no poll within the test

    def claims_made() -> float:
        return metrics.registry.get_sample_value("mpijc_notify_claims_total") or 0.0

    async with Receiver() as rx, api_client(settings, engine, metrics) as api:
        sub = str((await subscribe(api, rx, "ci"))["id"])
        async with dispatcher_running(settings, engine, metrics) as dispatcher:
            await dispatcher.listening.wait()
            async with engine.begin() as conn:  # announced: the dispatcher claims the first at once
                events = ("job.created", "job.running", "job.succeeded")
                await outbox.enqueue(conn, [row(sub, "pi", event) for event in events])
            received = await rx.wait_for("ci", 3, timeout_s=10)  # each settle woke a claim
            made = claims_made()
            await asyncio.sleep(1.0)  # the last settle freed nothing: no claim follows it
            assert claims_made() == made
    assert [r.payload["type"] for r in received] == list(events)
