"""Holding a fair share of a partitioned role's partitions through their leases, and handing
them over (:mod:`controller.bus.leases`).

:class:`PartitionHolder` is the balancing loop every partitioned role runs (the rules consumer,
:mod:`consumers.rules.replica`; the log followers of the watchers, :mod:`watchers.sharing`):
every third of the lease TTL it says the replica is alive, renews its leases (a partition whose
lease was lost is stopped at once, not handed back: someone else holds it), releases the
surplus above its fair share (stopped first, then handed back, so the next holder starts where
it stopped) and claims free partitions up to its share, starting where the replica's name points
so that replicas starting together spread out. What running a partition means is the role's:
``start`` and ``stop`` callbacks. Starting may take longer than a lease (a warm start): the
leases are renewed meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from controller.bus.leases import Leases
from controller.contract.clock import pause

__all__ = ["PartitionHolder"]

log = logging.getLogger(__name__)

T = TypeVar("T")


class PartitionHolder:
    """Keeps a fair share of ``leases``' partitions running (see the module).

    ``start(partition)`` runs a partition just claimed (raising: it failed, the lease is handed
    back and claimed again later); ``stop(partition, release)`` stops one, ``release`` saying
    whether it is handed over (the role may save where it stands first) or was lost."""

    def __init__(
        self,
        leases: Leases,
        heartbeat_s: float,
        start: Callable[[int], Awaitable[None]],
        stop: Callable[[int, bool], Awaitable[None]],
    ) -> None:
        self.leases = leases
        self.heartbeat_s = heartbeat_s
        self._start = start
        self._stop = stop
        self._running: set[int] = set()
        self._turn = asyncio.Lock()

    @property
    def running(self) -> frozenset[int]:
        """The partitions started here and not stopped."""
        return frozenset(self._running)

    async def run(self, stop: asyncio.Event, check: Callable[[], None] | None = None) -> None:
        """Rebalance every heartbeat until ``stop`` (``check`` first: it raises to take the replica
        down); then hand every partition back. Cancelled, it hands nothing back: a crash, the
        leases expire and the other replicas take the partitions over."""
        while not stop.is_set():
            if await pause(stop, self.heartbeat_s):
                break
            if check is not None:
                check()
            try:
                await self.rebalance()
            except Exception:  # NATS restarting: the next heartbeat tries again
                log.exception("replica %s: rebalancing failed", self.leases.replica)
        await self.leave()

    async def leave(self) -> None:
        """Stop every partition, hand it back, and stop counting as a member."""
        async with self._turn:
            for partition in sorted(self._running):
                await self._drop(partition, release=True)
            with contextlib.suppress(Exception):
                await self.leases.leave()

    async def rebalance(self) -> None:
        """Say we are alive, keep our leases, give up the surplus, claim our share. The heartbeat
        and the renewals are sent together: one after the other, on a loaded replica's busy loop,
        they had outlasted the lease (``benchmarks/README.md``, issue 40)."""
        async with self._turn:
            leases = self.leases
            running = sorted(self._running)
            counted, *renewed = await asyncio.gather(
                leases.heartbeat(), *(leases.renew(p) for p in running), return_exceptions=True
            )
            for partition, kept in zip(running, renewed, strict=True):
                if kept is False:  # someone else's now (an unanswered renewal is tried again)
                    await self._drop(partition, release=False)
            for answer in (counted, *renewed):
                if isinstance(answer, BaseException):
                    raise answer
            assert isinstance(counted, int)  # not an exception: raised above
            share = counted
            for partition in sorted(self._running, reverse=True)[: max(len(self._running) - share, 0)]:
                await self._drop(partition, release=True)
            first = zlib.crc32(leases.replica.encode()) % leases.partitions
            won: list[int] = []
            for step in range(leases.partitions):
                if len(self._running) + len(won) >= share:
                    break
                partition = (first + step) % leases.partitions
                if partition not in self._running and await leases.claim(partition):
                    won.append(partition)
            # the partitions won start side by side: a warm start is as long as the longest one
            started = await self.renewing(
                asyncio.gather(*(self._start(p) for p in won), return_exceptions=True)
            )
            for partition, outcome in zip(won, started, strict=True):
                if isinstance(outcome, Exception):  # NATS trouble: let it go, try again next heartbeat
                    replica = leases.replica
                    log.error(
                        "replica %s: partition %d failed to start", replica, partition, exc_info=outcome
                    )
                    await leases.release(partition)
                elif isinstance(outcome, BaseException):
                    raise outcome
                else:
                    self._running.add(partition)

    async def _drop(self, partition: int, *, release: bool) -> None:
        self._running.discard(partition)
        await self._stop(partition, release)
        if release:
            await self.leases.release(partition)

    async def renewing(self, work: Awaitable[T]) -> T:
        """``work`` (warm starts: seconds on a big cluster), renewing every lease held meanwhile;
        a warm start longer than the lease TTL lost the partitions it was starting, and the
        replica started them all over again. A renewal in flight when the work ends is finished,
        not cancelled: cancelled, its new revision would be unknown and the next renewal fail.
        Each renewal is only writes, sent together (the member key and every lease), and no
        count of the members: on a loop busy with warm starts each request waits its turns, and
        one after the other with the count (a watch of the bucket) they outlasted the lease."""
        finished = asyncio.Event()
        leases = self.leases

        async def renew() -> None:
            while not finished.is_set():
                if await pause(finished, self.heartbeat_s):
                    return
                renewed = await asyncio.gather(
                    leases.alive(), *(leases.renew(p) for p in leases.held), return_exceptions=True
                )
                failed = [outcome for outcome in renewed if isinstance(outcome, Exception)]
                if failed:  # NATS restarting: the next heartbeat tries again
                    log.warning("replica %s: renewing leases while starting: %r", leases.replica, failed[0])

        renewer = asyncio.create_task(renew())
        try:
            return await work
        finally:
            finished.set()
            await renewer
