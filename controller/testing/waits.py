"""Waiting for something to become true, without sleeping through a fixed time, and a loop that
runs until its block ends."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any

__all__ = ["STARTUP_S", "running_until_exit", "until"]

STARTUP_S = 180.0
"""How long a test waits for a process it started to become ready (to answer, to start its
children, to carry a first job through): generous, because on a loaded 2-core machine, or beside
other pytest-xdist workers, a whole ``up`` takes tens of seconds to import and connect its eight
processes, where an idle one answers within seconds. A process that never gets ready still fails
the test; only a failing test waits this long."""


async def until(
    condition: Callable[[], bool | Awaitable[bool]],
    timeout_s: float = 5.0,
    what: Callable[[], object] = str,
    interval_s: float = 0.005,
) -> None:
    """Poll ``condition`` (plain or async) until it holds; fail after ``timeout_s`` saying ``what()``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        held = condition()
        if inspect.isawaitable(held):
            held = await held
        if held:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s: {what()}")
        await asyncio.sleep(interval_s)


@contextlib.asynccontextmanager
async def running_until_exit(
    run: Callable[[asyncio.Event], Coroutine[Any, Any, None]],
) -> AsyncIterator[None]:
    """``run(stop)`` as a task while inside; on the way out ``stop`` is set and the task awaited
    (what it had in flight finished, its error raised)."""
    stop = asyncio.Event()
    task = asyncio.create_task(run(stop))
    try:
        yield
    finally:
        stop.set()
        await task
