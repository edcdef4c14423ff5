"""A consumer process's background loop (the dispatcher, an exporter, the rules replica) that
fails takes the process down, so its supervisor restarts it, instead of leaving its role silently
undone; one that returns (nothing to do, e.g. no retention configured) does not."""

from __future__ import annotations

import asyncio

import pytest

from consumers.service import _until_stopped_or_failed


async def test_a_failing_loop_stops_the_process_and_names_itself() -> None:
    async def broken(stop: asyncio.Event) -> None:
        await asyncio.sleep(0.01)
        raise ConnectionError("database gone")

    stop = asyncio.Event()
    loop = asyncio.create_task(broken(stop), name="dispatch")
    with pytest.raises(
        RuntimeError, match=r"consumer loop dispatch failed: ConnectionError\('database gone'\)"
    ):
        await asyncio.wait_for(_until_stopped_or_failed(stop, [loop]), 5)


async def test_a_loop_with_nothing_to_do_returns_and_the_process_keeps_running() -> None:
    async def idle(stop: asyncio.Event) -> None:
        return None

    stop = asyncio.Event()
    waiting = asyncio.create_task(
        _until_stopped_or_failed(stop, [asyncio.create_task(idle(stop), name="audit")])
    )
    await asyncio.sleep(0.1)
    assert not waiting.done()
    stop.set()
    await asyncio.wait_for(waiting, 5)
