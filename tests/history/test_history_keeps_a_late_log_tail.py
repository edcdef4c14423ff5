"""A pod version stored without its log tail takes the tail when the watcher republishes it with
one (its first read was refused); the version again without a tail does not erase it."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.store.history import apply_events
from controller.store.models import PodStateRow
from controller.testing.events import at, failed_launcher, job

TAIL = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'horovod'\n"


async def stored_tails(engine: AsyncEngine) -> list[tuple[int, list[str]]]:
    async with engine.connect() as conn:
        rows = await conn.execute(select(PodStateRow.resource_version, PodStateRow.log_tail))
        return [(rv, tail) for rv, tail in rows]


async def test_a_late_tail_fills_the_stored_pod_version(engine: AsyncEngine) -> None:
    run = job("Failed", observed_at=at(1))
    with_tail = failed_launcher(TAIL, observed_at=at(1))
    without_tail = with_tail.model_copy(update={"log_tail": ()})
    version = int(with_tail.resource_version)

    async with engine.begin() as conn:
        await apply_events(conn, [run, without_tail])
    assert await stored_tails(engine) == [(version, [])]

    async with engine.begin() as conn:
        await apply_events(conn, [with_tail.model_copy(update={"observed_at": at(2)})])
    assert await stored_tails(engine) == [(version, list(with_tail.log_tail))]

    async with engine.begin() as conn:  # a redelivery, and both in one batch: the tail stays
        await apply_events(conn, [without_tail])
        await apply_events(conn, [without_tail, with_tail, without_tail])
    assert await stored_tails(engine) == [(version, list(with_tail.log_tail))]
