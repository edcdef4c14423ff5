"""What the webhook's connections may hold together: a cap on connections, a pool for large bodies.

Anyone who reaches the webhook's port can open connections and start uploads (unless mutual
TLS is on, and even then during the handshake), so what they all hold at once is bounded:

- **Connections**: at most ``max_connections``. A connection is *waiting* while the webhook
  waits for its client (TLS handshake, idle between requests, a request still arriving, the
  client's answer to the TLS close) and
  *working* while the webhook reads its review and answers. A connection beyond the cap closes
  the one that has waited longest: an idle or stalled connection is older than the API server's,
  which sends its request whole as soon as it connects. Only when every connection is working is
  the new one closed unserved. Each connection costs about 300 KiB, most of it the read buffer
  asyncio's TLS layer allocates per connection.
- **Bodies**: a review of up to :data:`SMALL_BODY_BYTES` (nearly all) is read without asking;
  a larger one holds its size in a pool of ``max_buffered_bytes`` from its headers until it is
  answered or dropped, and one that does not fit is answered 503 before it is read. Memory for
  bodies is then at most the pool plus the small allowance of each connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

__all__ = ["SMALL_BODY_BYTES", "BodyPool", "Connections", "Slot"]

SMALL_BODY_BYTES: Final = 64 << 10
"""A body up to this size is read without drawing on the pool (an MPIJob UPDATE is a few KiB)."""


class Slot:
    """One connection's place under the cap: its task, and since when it waits for its client."""

    __slots__ = ("_clock", "task", "waiting_since")

    def __init__(self, task: asyncio.Task[None], clock: Callable[[], float]) -> None:
        self.task, self._clock = task, clock
        self.waiting_since: float | None = clock()

    def wait(self) -> None:
        """The webhook waits for the client (counted from the first such moment since it last worked)."""
        if self.waiting_since is None:
            self.waiting_since = self._clock()

    def work(self) -> None:
        """The webhook reads the client's review and answers it: this connection is not closed to
        make room."""
        self.waiting_since = None


class Connections:
    """At most ``most`` connections; beyond it the longest-waiting one is closed (see the module)."""

    def __init__(self, most: int, clock: Callable[[], float]) -> None:
        self.most, self._clock = most, clock
        self._slots: set[Slot] = set()

    def __len__(self) -> int:
        return len(self._slots)

    def admit(self, task: asyncio.Task[None]) -> tuple[Slot | None, Slot | None]:
        """A place for a new connection served by ``task`` (None when every connection is working),
        and the connection closed to make room for it, if one was (its task is cancelled)."""
        evicted = None
        if len(self._slots) >= self.most:
            waiting = [slot for slot in self._slots if slot.waiting_since is not None]
            if not waiting:
                return None, None
            evicted = min(waiting, key=lambda slot: slot.waiting_since or 0.0)
            self._slots.discard(evicted)
            evicted.task.cancel()
        slot = Slot(task, self._clock)
        self._slots.add(slot)
        return slot, evicted

    def leave(self, slot: Slot) -> None:
        """The connection is closed."""
        self._slots.discard(slot)


class BodyPool:
    """Bytes of bodies over :data:`SMALL_BODY_BYTES` held at once, over all connections."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.held = 0

    def take(self, size: int) -> bool:
        """Hold ``size`` bytes for a body if they fit (a small body needs no place: True)."""
        if size <= SMALL_BODY_BYTES:
            return True
        if self.held + size > self.most:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        """The body taken with :meth:`take` is answered or dropped."""
        if size > SMALL_BODY_BYTES:
            self.held -= size
