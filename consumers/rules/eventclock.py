"""Now, as the events of the rules consumer tell it."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta

from controller.contract.clock import Clock

__all__ = ["EventClock"]


class EventClock:
    """Now, as the events tell it: the newest ``observed_at`` plus the wall time since it arrived.

    Live, that is the wall clock. While the consumer catches up on a backlog, or a capture is
    replayed, the time-based rules measure in the events' own time, so a backlog or an old
    recording never looks like a job that hung for days.
    """

    def __init__(self, wall: Clock, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._wall = wall
        self._monotonic = monotonic
        self._newest: datetime | None = None
        self._arrived = 0.0

    @property
    def newest(self) -> datetime | None:
        """The newest ``observed_at`` seen."""
        return self._newest

    def advance(self, observed_at: datetime) -> None:
        """An event observed at ``observed_at`` arrived."""
        if self._newest is None or observed_at > self._newest:
            self._newest, self._arrived = observed_at, self._monotonic()

    def __call__(self) -> datetime:
        if self._newest is None:
            return self._wall()
        return self._newest + timedelta(seconds=self._monotonic() - self._arrived)
