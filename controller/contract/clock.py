"""Time as every process reads it: injected, so rules and tests never wait on the wall clock.

Two meanings, two names: a :data:`Clock` tells the time of day (timestamps, thresholds,
retention), a :data:`Monotonic` measures intervals (caches, timeouts) and never jumps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "Monotonic", "monotonic", "utcnow"]

Clock = Callable[[], datetime]
"""The time of day, timezone-aware UTC."""

Monotonic = Callable[[], float]
"""Seconds from an arbitrary start, for measuring intervals."""

monotonic: Monotonic = time.monotonic


def utcnow() -> datetime:
    """Now, in UTC."""
    return datetime.now(UTC)
