"""Time as every process reads it: injected, so rules and tests never wait on the wall clock.

Two meanings, two names: a :data:`Clock` tells the time of day (timestamps, thresholds,
retention), a :data:`Monotonic` measures intervals (caches, timeouts) and never jumps.
:func:`first_of` waits for whichever of several events comes first (a stop, a wake-up);
:func:`pause` waits a while unless an event (a stop) comes first.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "Monotonic", "first_of", "monotonic", "pause", "utcnow"]

Clock = Callable[[], datetime]
"""The time of day, timezone-aware UTC."""

Monotonic = Callable[[], float]
"""Seconds from an arbitrary start, for measuring intervals."""

monotonic: Monotonic = time.monotonic


def utcnow() -> datetime:
    """Now, in UTC."""
    return datetime.now(UTC)


async def first_of(*events: asyncio.Event) -> None:
    """Wait until any of ``events`` is set; the waits on the others are cancelled."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


async def pause(event: asyncio.Event, seconds: float) -> bool:
    """Wait ``seconds`` unless ``event`` (a stop) is set first; whether it is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
    return event.is_set()
