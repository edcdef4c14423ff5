"""The garbage collector's pace for these processes, set once at start.

CPython starts a young collection every 700 allocations, and a full one (every object of
the heap) every hundred of those once the heap has grown by a quarter. These processes
allocate a short-lived tree per event (a raw object, its normalized model, its JSON, a
database row) and keep large long-lived state (the watcher's published versions, the rules'
runs: hundreds of MiB on a big cluster), so with the defaults the collector ran every few
events and its full collections walked that state over and over: 30-40 % of the watcher's
CPU while it normalized a relist (``benchmarks/README.md``). Almost nothing they allocate
forms reference cycles; reference counting frees it at once, so collecting less often costs
little memory.
"""

from __future__ import annotations

import gc

YOUNG_ALLOCATIONS = 50_000
"""Net allocations between young collections (CPython: 700)."""
YOUNG_PER_MIDDLE = 20
"""Young collections between middle ones (CPython: 10)."""
MIDDLE_PER_FULL = 100
"""Middle collections before a full one is considered (CPython: 10)."""


def pace_collector() -> None:
    """Collect garbage at the pace above (the same in every process, the benchmarks included)."""
    gc.set_threshold(YOUNG_ALLOCATIONS, YOUNG_PER_MIDDLE, MIDDLE_PER_FULL)
