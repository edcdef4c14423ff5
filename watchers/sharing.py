"""The log followers of the watcher replicas, sharing the followed runs through leases.

Every watcher replica, leading or not, runs one :class:`~watchers.following.LogFollower`. The
runs are split into ``MPIJC_LOGS__PARTITIONS`` partitions by a stable hash of namespace/job;
each replica follows the runs of the partitions it holds a lease on
(:class:`~controller.bus.holding.PartitionHolder` over the ``logs-leases`` bucket, TTL
``MPIJC_LOGS__LEASE_TTL_S``), a fair share: a replica that stops renewing (killed, cut off)
loses its partitions after the TTL and the others take them over, resuming each container from
the bus (:func:`controller.bus.logstore.stored_end`) with no gap and no duplicate line.

A replica stops a partition's follows as soon as it fails to renew its lease, and stops them
before releasing one it hands over. What is left of an overlap (a replica paused past its
lease, publishing before it notices) cannot store a line twice: each batch is stored only
after the container's last stored batch (:func:`controller.bus.logstore.publish_after`); the
follow that finds another batch there stops.

The pods are learnt from the bus, not from a watch of its own: the ``published`` bucket holds
the last observation the leader published of every pod that exists, and a watch of it gives
each replica all of them at start and every change after (:func:`watchers.published.watch_pods`);
the progress probes the leader publishes on ``jobs.*.*.log``, heard through a core subscription
(:func:`controller.bus.listening.listening`), say which runs went quiet. So the
leader's follower runs the same way as the others', whichever replica leads.
"""

from __future__ import annotations

import asyncio
import logging

from controller.bus.client import NATS
from controller.bus.holding import PartitionHolder
from controller.bus.leases import Leases, lease_bucket, replica_name
from controller.bus.listening import listening
from controller.bus.versions import open_published
from controller.contract.backoff import Backoff
from controller.contract.cancelling import cancel_and_wait
from controller.contract.events import BusEvent, LogProbed
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from watchers.following import LogFollower, LogSource
from watchers.metrics import WatchMetrics
from watchers.published import watch_pods

__all__ = ["LEASE_BUCKET", "SharedFollower"]

log = logging.getLogger(__name__)

LEASE_BUCKET = "logs-leases"
RESYNC_S = 300.0
"""How often each replica reads the pods of the ``published`` bucket whole again: a watch that a
NATS restart left silent, or a deletion it missed, lasts at most this long."""


class SharedFollower:
    """One watcher replica's share of the log follows (see the module).

    :meth:`run` follows until ``stop``, then hands its partitions back; cancelled instead, it
    hands nothing back (a crash): the leases expire and the other replicas take over."""

    def __init__(
        self,
        settings: Settings,
        source: LogSource,
        nc: NATS,
        topology: Topology,
        metrics: WatchMetrics | None = None,
        replica: str | None = None,
    ) -> None:
        self._settings = settings
        self._nc = nc
        self._topology = topology
        self.replica = replica or replica_name()
        self.follower = LogFollower(
            source,
            nc,
            topology,
            settings.logs,
            settings.nats,
            settings.watcher.backoff_max_s,
            metrics,
            held=(),
        )

    async def run(self, stop: asyncio.Event) -> None:
        """Hold a fair share of the partitions and follow their runs until ``stop``."""
        js, logs = self._nc.jetstream(), self._settings.logs
        bucket = await lease_bucket(
            js,
            self._topology.bucket(LEASE_BUCKET),
            logs.lease_ttl_s,
            self._settings.nats.replicas,
            "log follows",
        )
        leases = Leases(bucket, self.replica, logs.partitions, "logs")
        holder = PartitionHolder(leases, logs.lease_ttl_s / 3, self._hold, self._let_go)
        async with (
            listening(self._nc, self._topology.log_probes(), self._probed),
            asyncio.TaskGroup() as group,
        ):
            group.create_task(self._learn_pods(stop), name="log-follow-pods")
            group.create_task(self.follower.run(stop), name="log-follow-schedule")
            try:
                await holder.rebalance()  # a first share at once, not after a heartbeat
            except Exception:  # NATS restarting: the next heartbeat tries again
                log.exception("log followers: claiming a first share failed")
            group.create_task(holder.run(stop), name="log-follow-leases")

    async def _hold(self, partition: int) -> None:
        self.follower.hold(partition)

    async def _let_go(self, partition: int, release: bool) -> None:
        await self.follower.let_go(partition)

    async def _learn_pods(self, stop: asyncio.Event) -> None:
        """Tell the follower of every pod the ``published`` bucket holds and of each change until
        ``stop``."""
        learning = asyncio.create_task(self._learn_pods_forever())
        try:
            await stop.wait()
        finally:
            await cancel_and_wait([learning])

    async def _learn_pods_forever(self) -> None:
        """:meth:`_learn_pods`, watching the bucket again every ``RESYNC_S`` (or after an error:
        NATS restarting); each watch forgets, once it has caught up, the pods it did not tell
        (deleted while a watch was not looking)."""
        backoff = Backoff(self._settings.logs.retry_s, self._settings.watcher.backoff_max_s)
        while True:
            try:
                kv = await open_published(self._nc.jetstream(), self._topology, self._settings.nats)
                pods = watch_pods(kv)
                seen: set[str] | None = set()
                try:
                    async with asyncio.timeout(RESYNC_S):
                        async for uid, pod, caught_up in pods:
                            if pod is None:
                                self.follower.forget(uid)
                            else:
                                self.follower.track(pod)
                            if seen is not None:
                                seen.add(uid)
                                if caught_up:
                                    for gone in self.follower.pods - seen:
                                        self.follower.forget(gone)
                                    seen = None
                            backoff.reset()
                finally:
                    await pods.aclose()
            except TimeoutError:  # time to watch again from the start
                continue
            except Exception as exc:  # the bus away: watch again
                delay = backoff.next_delay()
                log.warning(
                    "log followers: the pods published are not watched, again in %.1fs: %r", delay, exc
                )
                await asyncio.sleep(delay)

    async def _probed(self, event: BusEvent) -> None:
        """A progress probe published by the leader: whether its run went quiet."""
        if isinstance(event, LogProbed):
            self.follower.quiet(event.job.uid, event.new_lines)
