"""A clock of seconds that moves only when the test sets it: pass it where code takes ``() -> float``."""

from __future__ import annotations


class ManualClock:
    """Monotonic seconds, ``now``, that move only when told."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now
