"""Dispatchers running apart from the notify consumer (``consume --only dispatch``) hear of new
deliveries through PostgreSQL ``NOTIFY`` at commit, not at their next poll; a redelivery made
through the API wakes them the same way, and a lost listening connection is replaced.

Every dispatcher here polls once a minute: a delivery arriving within seconds was woken."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import httpx
import pytest
from nats.js import JetStreamContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.notify.dispatch import Dispatcher
from controller.contract.subjects import Topology
from controller.testing.notify import (
    dispatcher_running,
    job,
    publish_jobs,
    settled_log,
    subscribe,
    with_notify,
)
from controller.testing.receivers import Receiver, Reply
from controller.testing.waits import until
from tests.notify_fixtures import Notifying

POLL_S = 60.0
WOKEN_WITHIN_S = 10.0

_LISTENERS = text(
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE 'LISTEN %'"
)


async def listener_pids(engine: AsyncEngine) -> set[int]:
    async with engine.connect() as conn:
        return set((await conn.execute(_LISTENERS)).scalars())


@dataclass
class Apart:
    """A receiver, the API, and dispatchers listening in processes of their own (as it were)."""

    rx: Receiver
    api: httpx.AsyncClient
    dispatchers: list[Dispatcher]


Start = Callable[[int], contextlib.AbstractAsyncContextManager[Apart]]


@pytest.fixture
def apart(notifying: Notifying) -> Start:
    """Start ``n`` slowly polling dispatchers and a notify consumer that cannot wake them in process."""
    with_notify(notifying.settings, poll_interval_s=POLL_S)

    @contextlib.asynccontextmanager
    async def running(n: int = 1) -> AsyncIterator[Apart]:
        async with contextlib.AsyncExitStack() as stack:
            rx = await stack.enter_async_context(Receiver())
            api = await stack.enter_async_context(notifying.api())
            dispatchers = [
                await stack.enter_async_context(
                    dispatcher_running(notifying.settings, notifying.engine, notifying.metrics)
                )
                for _ in range(n)
            ]
            await stack.enter_async_context(notifying.consuming())
            for dispatcher in dispatchers:
                await dispatcher.listening.wait()
            yield Apart(rx, api, dispatchers)

    return running


async def test_a_consumer_in_another_process_wakes_the_dispatchers(
    apart: Start, topology: Topology, js: JetStreamContext
) -> None:
    async with apart(2) as it:
        await subscribe(it.api, it.rx, "ci")
        await publish_jobs(js, topology, job("Pending", change="ADDED"), job("Running"), job("Succeeded"))
        received = await it.rx.wait_for("ci", 3, timeout_s=WOKEN_WITHIN_S)

    # the two dispatchers shared the work without sending anything twice or out of order
    assert [r.payload["type"] for r in received] == ["job.created", "job.running", "job.succeeded"]
    assert len({r.webhook_id for r in it.rx.at("ci")}) == len(it.rx.at("ci")) == 3
    assert all(r.verified for r in received)


async def test_a_redelivery_through_the_api_wakes_a_dispatcher(
    apart: Start, topology: Topology, js: JetStreamContext
) -> None:
    async with apart(1) as it:
        it.rx.script("ci", Reply(400))
        sub = await subscribe(it.api, it.rx, "ci", event_types=["job.created"])
        await publish_jobs(js, topology, job("Pending", change="ADDED"))
        (dead,) = await settled_log(it.api, sub["id"], 1)
        queued = await it.api.post(f"/api/v1/deliveries/{dead['id']}/redeliver")
        first, second = await it.rx.wait_for("ci", 2, timeout_s=WOKEN_WITHIN_S)

    assert dead["status"] == "failed" and queued.status_code == 202
    assert (first.status, second.status) == (400, 200)
    assert first.webhook_id == second.webhook_id == dead["id"]


async def test_a_lost_listening_connection_is_replaced(apart: Start, notifying: Notifying) -> None:
    async with apart(1) as it:
        (dispatcher,) = it.dispatchers
        (old,) = await listener_pids(notifying.engine)
        # as a database failover or an idle-connection reaper would
        async with notifying.engine.connect() as conn:
            assert (await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": old})).scalar()

        async def listening_again() -> bool:
            return dispatcher.listening.is_set() and bool(await listener_pids(notifying.engine) - {old})

        await until(listening_again)
        await subscribe(it.api, it.rx, "ci")
        await notifying.publish(job("Pending", change="ADDED"))
        (received,) = await it.rx.wait_for("ci", 1, timeout_s=WOKEN_WITHIN_S)

    assert received.payload["type"] == "job.created" and received.verified
