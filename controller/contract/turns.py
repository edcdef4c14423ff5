"""Long CPU work on an event loop, done in turns so that the loop's other tasks run in between.

A rules partition's warm start parses hundreds of runs from its snapshot, replays the events
after it and ticks every run, each item a millisecond or so of CPU, with no wait on the bus in
between. Done in one go it held the process's event loop for seconds on a loaded machine (two
partitions one after the other): the renewals of the partitions' leases waited behind it, the
leases expired (6 s), the replica lost the partitions it was warm-starting and started them all
over again, two or three times (``benchmarks/README.md``, issue 40). :class:`Turns` hands the loop
over every :data:`TURN_S` of such work: one clock read per item, one loop pass per turn.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["TURN_S", "Turns"]

TURN_S = 0.01
"""Seconds of work, at most, between two passes of the loop (its other tasks wait that long)."""


class Turns:
    """Call :meth:`take` after each item of a long piece of work: once ``turn_s`` has passed since
    the last turn, the loop runs its other ready tasks (and reads its sockets) before the next."""

    def __init__(self, turn_s: float = TURN_S) -> None:
        self._turn_s = turn_s
        self._since = time.monotonic()
        self.taken = 0
        """Turns handed over so far."""

    async def take(self) -> None:
        """Hand the loop over if this turn is up; else return at once."""
        if time.monotonic() - self._since < self._turn_s:
            return
        await asyncio.sleep(0)
        self.taken += 1
        self._since = time.monotonic()
