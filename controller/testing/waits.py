"""Waiting for something to become true, without sleeping through a fixed time."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

__all__ = ["until"]


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
