"""Where a start's time goes: named phases, each with its wall time, and the process's age.

A process of ``up`` (or a Deployment's pod) is ready only after a chain of steps — its
interpreter and imports, a connection, buckets, leases, a warm start — several of them waits on
the broker rather than work. :class:`Phases` times such a chain with the monotonic clock and
writes it as one log line (``connect 0.02s, claim 0.01s, …, ready +3.21s``), the ``+`` being
:func:`process_age`: seconds since the process was started, so the lines of several processes
in one log (``up.log``) line up with each other and with ``up``'s own.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["Phases", "process_age"]

_IMPORTED = time.monotonic()


def _started_on_boot_clock() -> float | None:
    """When this process started, in seconds of ``CLOCK_BOOTTIME`` (Linux: ``/proc/self/stat``'s
    start time, in clock ticks since boot); None where that cannot be read."""
    try:
        # after the command's closing parenthesis (the command may hold spaces)
        fields = Path("/proc/self/stat").read_bytes().rsplit(b")", 1)[1].split()
        return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of the whole line
    except (OSError, ValueError, IndexError, AttributeError):
        return None


_STARTED = _started_on_boot_clock()


def process_age() -> float:
    """Seconds since this process started (to the clock tick, 10 ms on Linux); where the start
    cannot be read, since this module was imported."""
    if _STARTED is not None and hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME) - _STARTED
    return time.monotonic() - _IMPORTED


class Phases:
    """Consecutive phases of one start: :meth:`mark` ends the current one under a name."""

    def __init__(self) -> None:
        self._last = time.monotonic()
        self.marks: list[tuple[str, float]] = []
        """(name, seconds) of each phase ended, in order."""

    def mark(self, name: str) -> float:
        """End the phase under way as ``name``; its seconds."""
        now = time.monotonic()
        seconds, self._last = now - self._last, now
        self.marks.append((name, seconds))
        return seconds

    def __str__(self) -> str:
        phases = ", ".join(f"{name} {seconds:.3f}s" for name, seconds in self.marks)
        return f"{phases}; at +{process_age():.3f}s of the process"
