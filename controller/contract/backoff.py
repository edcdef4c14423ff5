"""How long to wait before trying again after a failure that may pass: exponential, jittered.

Used wherever a loop retries the same thing until it works (a watch reconnecting, an
exporter re-sending, a publisher re-publishing). Deliveries with a finite retry schedule
and ``Retry-After`` use :class:`consumers.notify.sending.RetrySchedule` instead.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Exponential delays with "equal jitter": uniform in [base/2, base], base doubling up to a cap."""

    def __init__(self, initial_s: float, max_s: float, rng: Callable[[], float] = random.random) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self._rng = rng
        self.attempt = 0

    def next_delay(self) -> float:
        base = min(self.max_s, self.initial_s * 2.0**self.attempt)
        self.attempt += 1
        return base / 2 + base / 2 * self._rng()

    def reset(self) -> None:
        self.attempt = 0
