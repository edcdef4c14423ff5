"""History replicas write side by side: batches touching the same pods in any order never deadlock.

The history consumer runs as two replicas sharing one durable, so one job's pods arrive in
both replicas' batches at once, in whatever order the watch produced them. PostgreSQL aborts
one of two transactions that lock the same rows in opposite orders ("deadlock detected"),
which costs a redelivery and a second of latency; every statement therefore writes its rows
in key order.
"""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.events import BusEvent
from controller.store.history import apply_events
from controller.store.models import PodRow, PodStateRow
from controller.testing.events import T0, worker

PODS = 200
ROUNDS = 8


def batch(version: int, *, reverse: bool) -> list[BusEvent]:
    pods: list[BusEvent] = [
        worker(n, uid=f"uid-w{n:03d}", resource_version=str(1000 * version + n), observed_at=T0)
        for n in range(PODS)
    ]
    return pods[::-1] if reverse else pods


async def test_two_writers_with_opposite_orders_both_commit(engine: AsyncEngine) -> None:
    async def write(reverse: bool) -> None:
        for version in range(1, ROUNDS + 1):
            async with engine.begin() as conn:
                await apply_events(conn, batch(2 * version + reverse, reverse=reverse))

    await asyncio.gather(write(reverse=False), write(reverse=True))  # a deadlock raises here

    async with engine.connect() as conn:
        pods = (await conn.execute(select(func.count()).select_from(PodRow))).scalar_one()
        states = (await conn.execute(select(func.count()).select_from(PodStateRow))).scalar_one()
        newest = (await conn.execute(select(func.max(PodRow.resource_version)))).scalar_one()
    assert (pods, states) == (PODS, PODS * ROUNDS * 2)
    assert newest == 1000 * (2 * ROUNDS + 1) + PODS - 1
