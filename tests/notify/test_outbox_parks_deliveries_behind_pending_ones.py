"""A delivery queued behind a pending one of the same job and subscription is parked — never
scanned by a claim — and becomes due when the one ahead settles (delivered or dead), not when
it is retried; a row parked as the row ahead settled in another transaction is freed by the
dispatcher's sweep; re-enabling a subscription leaves parked rows parked; a claim skips the
rows another dispatcher is claiming at that moment instead of waiting for its transaction."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.metrics import PipelineMetrics
from controller.store import outbox
from controller.store.outbox import Outcome
from controller.testing.notify import api_client, dispatcher_running, log_of, subscribe, with_notify
from controller.testing.receivers import Receiver

NOW = datetime.now(UTC)


def row(subscription_id: str, job_uid: str, event: str) -> dict[str, Any]:
    """An outbox row as the notify consumer writes it."""
    return {
        "id": outbox.delivery_id(subscription_id, f"{event}:{job_uid}"),
        "subscription_id": subscription_id,
        "channel": "webhook",
        "event_type": event,
        "order_key": job_uid,
        "namespace": "team-a",
        "job_name": job_uid,
        "job_uid": job_uid,
        "body": json.dumps({"type": event}),
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": NOW,
        "event_at": NOW,
        "created_at": NOW,
    }


async def claimable(engine: AsyncEngine, at: datetime = NOW) -> list[tuple[str, str]]:
    """What a claim takes now: (job uid, event type) per row, leasing them for a minute."""
    async with engine.begin() as conn:
        claims = await outbox.claim(conn, at, at + timedelta(minutes=1), 100, 100)
    return [(c.order_key, c.event_type) for c in claims]


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


@pytest.fixture
async def subscription(settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics) -> str:
    with_notify(settings)
    async with Receiver() as rx, api_client(settings, engine, metrics) as api:
        created = await subscribe(api, rx, "ci")
    return str(created["id"])


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
    async with engine.begin() as conn:
        await outbox.enqueue(conn, [row(sub, "pi", "job.created"), row(sub, "pi", "job.running")])
    async with engine.begin() as conn:  # settled by a transaction that never saw the parked row
        await conn.execute(
            text("UPDATE deliveries SET status = 'delivered' WHERE event_type = 'job.created'")
        )
    assert await claimable(engine) == []

    async with engine.begin() as conn:
        assert await outbox.unpark_heads(conn, NOW) == 1
        assert await outbox.unpark_heads(conn, NOW) == 0
    assert await claimable(engine) == [("pi", "job.running")]


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
    async with engine.begin() as conn:
        await outbox.enqueue(conn, [row(sub, "pi", "job.created"), row(sub, "pi", "job.running")])
    await settle(engine, sub, "pi", "job.created", "retry", next_attempt_at=NOW + timedelta(hours=1))
    async with engine.begin() as conn:
        await outbox.resume(conn, sub, NOW)
    assert await claimable(engine) == [("pi", "job.created")]


async def test_a_claim_skips_rows_another_dispatcher_is_claiming(
    subscription: str, engine: AsyncEngine
) -> None:
    sub = subscription
    async with engine.begin() as conn:
        await outbox.enqueue(conn, [row(sub, f"job-{n}", "job.created") for n in range(4)])
    async with engine.connect() as first, engine.begin() as second:
        await first.begin()
        held = await outbox.claim(first, NOW, NOW + timedelta(minutes=1), 2, 100)  # not committed yet
        await second.execute(text("SET LOCAL lock_timeout = '2s'"))  # waiting would fail, not hang
        taken = await outbox.claim(second, NOW, NOW + timedelta(minutes=1), 4, 100)
        await first.commit()
    assert [c.order_key for c in held] == ["job-0", "job-1"]
    assert [c.order_key for c in taken] == ["job-2", "job-3"]
    assert await claimable(engine) == []
