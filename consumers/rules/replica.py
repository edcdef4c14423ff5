"""The partitions one replica of the rules consumer runs, and handing them over.

:class:`RulesReplica` is what ``consume --only rules`` runs. The jobs are split
into ``rules_partitions`` partitions by a stable hash of namespace/job
(:meth:`Topology.job_partition`); each partition has its own engine, snapshot, durable
``rules_p<n>`` and ticker, and is run by the one replica holding its lease
(:mod:`controller.bus.leases`), kept and handed over by
:class:`~controller.bus.holding.PartitionHolder`. A partition's durable reads all of ``jobs.>``
and is run by the bus's door (:mod:`controller.bus.consuming`) as this partition's
:class:`~controller.bus.consuming.Share`: other partitions' events are acknowledged unread (NATS
2.9 has no server-side partitioning; 2.10's stream subject transforms could remove that read
amplification), and so are events folded in already and published. Beside it runs the
partition's lane of failure signals (:meth:`RulesReplica._urgent`). Taking a partition
over, a replica loads its snapshot, replays silently what the previous holder had
acknowledged after it (the durable's ack floor: published already), and observes the rest
*as if live*, publishing with the revisions the previous holder would have used, so a change
it had published before dying collapses on its ``Nats-Msg-Id``; then it reconciles with
FINDINGS as a warm start does (:mod:`consumers.rules.service`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from consumers.rules.engine import RuleEngine
from consumers.rules.metrics import RulesMetrics
from consumers.rules.service import CONSUMER, RulesService, WarmStart, run_ticker
from consumers.rules.snapshot import SnapshotStore, state_bucket
from consumers.rules.thresholds import RuleThresholds
from controller.bus.client import NATS, KeyValue
from controller.bus.consuming import Durable, Share, open_durables, run_durable
from controller.bus.holding import PartitionHolder
from controller.bus.leases import Leases, lease_bucket, replica_name
from controller.bus.publishing import PUBLISH_RETRY_S
from controller.bus.streams import ack_floor, remove_durable
from controller.contract.cancelling import stop_within
from controller.contract.clock import Clock
from controller.contract.events import BusEvent, parse_event
from controller.contract.phases import Phases
from controller.contract.settings import ConsumerSettings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics

__all__ = ["LEASE_BUCKET", "RulesReplica"]

log = logging.getLogger(__name__)

LEASE_BUCKET = "rules-leases"
_STOP_TIMEOUT_S = 3.0  # longest wait for a partition's loops to finish the batch in hand


@dataclass
class _Claimed:
    """A partition this replica runs: its service and its loops (its durable, its lane, its ticker)."""

    service: RulesService
    warm: WarmStart
    stop: asyncio.Event
    """Set, the loops stop: a wait for messages ends at once, a batch in hand is finished."""
    tasks: list[asyncio.Task[None]]


class RulesReplica:
    """One replica of the partitioned rules consumer (see the module docstring).

    :meth:`start` joins the lease bucket and claims a fair share of the partitions (each
    warm-started from its snapshot); :meth:`run` keeps renewing, rebalancing and taking over
    expired partitions every third of the lease TTL until ``stop`` is set, then hands its
    partitions back. Cancelling :meth:`run` instead is a crash: nothing is handed back, the
    leases expire and other replicas take the partitions over."""

    def __init__(
        self,
        topology: Topology,
        settings: ConsumerSettings,
        thresholds: RuleThresholds,
        nc: NATS,
        metrics: PipelineMetrics,
        clock: Clock,
        replica: str | None = None,
        tick_s: float | None = None,
        replicas: int = 1,
        publish_retry_s: float = PUBLISH_RETRY_S,
    ) -> None:
        self._topology = topology
        self._settings = settings
        self._thresholds = thresholds
        self._nc = nc
        self._js = nc.jetstream()
        self._metrics = metrics
        self._rules_metrics = RulesMetrics.on(metrics.registry)
        self._clock = clock
        self._tick_s = tick_s if tick_s is not None else settings.rules_tick_s
        self.replica = replica or replica_name()
        self.partitions = settings.rules_partitions
        self.claimed: dict[int, _Claimed] = {}
        self.warm_starts: list[WarmStart] = []
        self._holder: PartitionHolder | None = None
        self._state: KeyValue | None = None
        self._replicas = replicas
        self._publish_retry_s = publish_retry_s

    @property
    def heartbeat_s(self) -> float:
        return self._settings.rules_lease_ttl_s / 3

    def service(self, partition: int) -> RulesService | None:
        """The service of a partition this replica runs, if it does."""
        claimed = self.claimed.get(partition)
        return claimed.service if claimed is not None else None

    async def start(self) -> None:
        """Open the buckets, retire the unpartitioned durable, claim a first share."""
        phases = Phases()
        self._state = await state_bucket(self._js, self._topology, self._replicas)
        phases.mark("state bucket")
        leases = Leases(
            await lease_bucket(
                self._js,
                self._topology.bucket(LEASE_BUCKET),
                self._settings.rules_lease_ttl_s,
                self._replicas,
                "rules leases",
            ),
            self.replica,
            self.partitions,
            "rules",
        )
        phases.mark("lease bucket")
        self._holder = PartitionHolder(leases, self.heartbeat_s, self._run_partition, self._stopped)
        old = self._topology.durable(CONSUMER)  # the single-replica durable of earlier versions
        if await remove_durable(self._js, self._topology.stream("jobs"), old):
            log.info("rules: removed the unpartitioned durable %s", old)
        phases.mark("old durable")
        await self.rebalance()
        phases.mark("claim and start")
        log.info("rules replica %s started: %s", self.replica, phases)

    async def run(self, stop: asyncio.Event) -> None:
        """Renew and rebalance until ``stop``; then hand every partition back."""
        assert self._holder is not None, "start() first"
        try:
            await self._holder.run(stop, self._raise_if_a_loop_failed)
        except asyncio.CancelledError:
            for claimed in self.claimed.values():  # a crash: the leases simply expire
                claimed.stop.set()
                for task in claimed.tasks:
                    task.cancel()
            raise

    def _raise_if_a_loop_failed(self) -> None:
        """A partition's loop that died (its durable deleted, say) takes the replica down with it
        rather than leaving the partition claimed and unread."""
        for partition, claimed in self.claimed.items():
            for task in claimed.tasks:
                if task.done() and not task.cancelled() and (failure := task.exception()) is not None:
                    raise RuntimeError(f"rules partition {partition}: {task.get_name()} failed") from failure

    async def leave(self) -> None:
        """Stop every partition and hand it back."""
        if self._holder is not None:
            await self._holder.leave()

    async def rebalance(self) -> None:
        """Say we are alive, keep our leases, give up the surplus, claim our share
        (:meth:`PartitionHolder.rebalance`)."""
        assert self._holder is not None, "start() first"
        await self._holder.rebalance()
        self._rules_metrics.partitions.set(len(self.claimed))
        self._rules_metrics.runs.set(sum(len(c.service.engine) for c in self.claimed.values()))

    async def _run_partition(self, partition: int) -> None:
        assert self._state is not None
        service = RulesService(
            RuleEngine(self._thresholds),
            self._js,
            self._topology,
            self._rules_metrics,
            self._clock,
            partition=(partition, self.partitions),
            snapshots=SnapshotStore(self._state, partition),
            publish_retry_s=self._publish_retry_s,
        )
        durable = self._topology.partition_durable(CONSUMER, partition)
        phases = Phases()
        # None, a new partition: everything before now is old news
        live_after = await ack_floor(self._js, self._topology.stream("jobs"), durable)
        phases.mark("ack floor")
        warm = await service.warm_start(live_after=live_after, phases=phases)
        self.warm_starts.append(warm)
        pulled, urgent = await open_durables(
            self._nc,
            self._topology,
            self._settings,
            [self._durable(service, durable), self._urgent(service, f"{durable}_urgent")],
            self._metrics,
            self._publish_retry_s,
        )
        phases.mark("open durables")
        log.info("rules partition %d pulling: %s", partition, phases)
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(run_durable(pulled, stop), name=f"rules-p{partition}"),
            asyncio.create_task(
                run_ticker(service, self._tick_s, stop, at_once=False), name=f"rules-tick-p{partition}"
            ),
            asyncio.create_task(run_durable(urgent, stop), name=f"rules-urgent-p{partition}"),
        ]
        self.claimed[partition] = _Claimed(service, warm, stop, tasks)

    async def _stopped(self, partition: int, release: bool) -> None:
        """Stop a partition; handed over (``release``), its snapshot is saved first."""
        claimed = self.claimed.pop(partition)
        claimed.stop.set()
        await stop_within(claimed.tasks, _STOP_TIMEOUT_S)
        await asyncio.gather(*claimed.tasks, return_exceptions=True)
        if release:  # the next holder resumes from here
            with contextlib.suppress(Exception):
                await claimed.service.checkpoint()
        log.info("rules replica %s stopped partition %d", self.replica, partition)

    @staticmethod
    def _durable(service: RulesService, name: str) -> Durable[BusEvent]:
        """The durable of one partition: its events folded, the others' acknowledged unread, and so
        are events folded in already (and published)."""

        def keeps(subject: str, sequence: int) -> bool:
            return service.owns(subject) and (sequence > service.folded or service.unpublished > 0)

        async def apply(events: Sequence[BusEvent], upto: int) -> None:
            await service.observe(events, upto)

        return Durable("jobs", CONSUMER, parse_event, share=Share(keeps, apply, service.advance), name=name)

    def _urgent(self, service: RulesService, name: str) -> Durable[BusEvent]:
        """The lane of failure signals (``jobs.*.*.urgent``) of one partition: fold them in at once.

        Behind a relist of thousands of pods, a pod OOM-killed now would wait its turn on the
        partition's durable. This lane folds it in as soon as it is published, without moving
        the folded sequence: the durable still reaches it in stream order and folds it again,
        which changes nothing (the state keeps the newest version of each object), and a
        restart replays it from the snapshot's sequence like any other event. So the lane may
        lose nothing that matters: whatever fails here is acknowledged and left to the durable."""

        def keeps(subject: str, sequence: int) -> bool:
            return service.owns(subject) and sequence > service.folded

        async def apply(events: Sequence[BusEvent], upto: int) -> None:
            await service.observe(events, ahead=True)
            self._rules_metrics.urgent.inc(len(events))

        subject = self._topology.urgent_job_events()
        return Durable(
            "jobs", CONSUMER, parse_event, share=Share(keeps, apply), subject=subject, name=name, lane=True
        )
