"""The rules consumer: bus events in, findings out, at least once.

A batch pull subscriber on ``jobs.>`` (durable ``rules``, explicit acks, bounded
redelivery, dead letters through :class:`controller.bus.settling.BatchSettler`) folds each
event into a :class:`RuleEngine` at the injected clock's ``now`` and publishes every
change of a finding to ``findings.<ns>.<job>.<rule>`` with ``Nats-Msg-Id`` from
:func:`controller.contract.findings.message_id`. A batch is acknowledged only after JetStream has
acknowledged every finding computed so far: changes that could not be published wait in
an outbox, the batch is negatively acknowledged (retryable), and the outbox is published
first on the next batch or tick. Duplicates collapse on the message id (within the
stream's duplicate window) and on ``revision`` downstream. :func:`run_ticker` calls
:meth:`RuleEngine.tick` every few seconds for the time-based rules (hangs, failures that
do not propagate). A lock keeps observe-then-publish and tick-then-publish whole, so
the changes of one finding reach the bus in revision order.

Warm start. The engine's state lives in memory, so a restarted consumer knows nothing of
the runs in flight: a worker failing after the restart would be judged without the job's
spec, and a finding firing before it would be published again as new. Before the durable
subscriber runs, :meth:`RulesService.warm_start` therefore

1. reads the JOBS stream from its first message up to its last sequence at start, with
   an ephemeral pull consumer (no acks, batched fetches), and observes every event at its
   own ``observed_at`` (ticking every few minutes of event time, so finished runs are
   forgotten as they would have been) — **without publishing**: those findings were
   published when the events first arrived, and publishing them again would announce old
   news. Bounded by the stream's ``max_age``; an unparsable message is skipped (the
   durable dead-letters it);
2. ticks once at the clock's ``now``, so time-based rules reflect the present;
3. reads the FINDINGS stream the same way, keeping the last change of each finding id,
   and :meth:`RuleEngine.reconcile` publishes what the bus is missing. This closes the
   gap that a silent replay alone would open: the durable redelivers whatever the old
   process had not acknowledged, and events published while no consumer ran arrive only
   now — but the replay already folded them in, so observing them again changes nothing,
   and without step 3 their findings would never be published. Reconciling also moves
   revision counters past what was published, so later changes are never dropped
   downstream as stale.

Changes that fired and cleared while no consumer ran collapse into the present state.

Snapshots. With a :class:`SnapshotStore` (:mod:`consumers.rules.snapshot`) the engine's runs,
firing findings and revision counters are written to the key-value bucket ``rules-state``
after every batch or tick that changed them — once every change they produced is
acknowledged by JetStream, and before the batch is acknowledged — with the JOBS sequence
they cover and the FINDINGS sequence up to which they agree with the bus. The warm start then
loads the snapshot, reads JOBS only after its sequence, and compares with FINDINGS only after
its findings sequence (the snapshot's firing findings standing for the bus before it): a
restart costs the tail, not the history.

Partitions (:class:`RulesReplica`, what ``consume --only rules`` runs). The jobs are split
into ``rules_partitions`` partitions by a stable hash of namespace/job
(:meth:`Topology.job_partition`); each partition has its own engine, snapshot, durable
``rules_p<n>`` and ticker, and is run by the one replica holding its lease
(:mod:`controller.bus.leases`). A partition's durable reads all of ``jobs.>`` and
acknowledges other partitions' events unread (NATS 2.9 has no server-side partitioning;
2.10's stream subject transforms could remove that read amplification). Taking a partition
over, a replica loads its snapshot, replays silently what the previous holder had
acknowledged after it (the durable's ack floor: published already), and observes the rest
*as if live*, publishing with the revisions the previous holder would have used, so a change
it had published before dying collapses on its ``Nats-Msg-Id``; then it reconciles with
FINDINGS as above. Events at or below the folded sequence are acknowledged without being
folded twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import ValidationError

from consumers.rules.engine import RuleEngine
from consumers.rules.snapshot import Snapshot, SnapshotStore, state_bucket
from consumers.rules.thresholds import RuleThresholds
from consumers.wiring import Role, Wiring
from controller.bus.client import NATS, JetStreamContext, KeyValue, Msg
from controller.bus.consuming import Durable
from controller.bus.leases import Leases, lease_bucket, replica_name
from controller.bus.publishing import PUBLISH_RETRY_S, Publisher
from controller.bus.pulling import Puller
from controller.bus.reading import last_sequence, read_stream
from controller.bus.settling import BatchSettler, DeadLetterer, consumer_config, lane_config
from controller.bus.streams import ack_floor, remove_durable
from controller.contract.clock import Clock
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent, job_of, parse_event
from controller.contract.findings import Finding, parse_finding
from controller.contract.settings import ConsumerSettings
from controller.contract.subjects import StreamFamily, Topology
from controller.metrics import MetricGroup, PipelineMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")

CONSUMER = "rules"
LEASE_BUCKET = "rules-leases"

TICK_INTERVAL_S = 5.0
"""Seconds between ticks: the time-based rules fire at most this late (thresholds are minutes)."""
REPLAY_BATCH = 1000
"""Messages per fetch while warm-starting."""
REPLAY_TICK_S = 300.0
"""Event-time seconds between ticks of the replay: only to forget finished runs on the way."""
_STOP_TIMEOUT_S = 3.0  # longest wait for a partition's loops to finish the batch in hand


class RulesMetrics(MetricGroup):
    """The rules consumer's own series."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.findings = Counter(
            "mpijc_findings_published",
            "Finding changes stored on the bus (not duplicates), by rule and status.",
            ["rule", "status"],
            registry=r,
        )
        self.duplicates = Counter(
            "mpijc_findings_duplicates",
            "Finding changes JetStream dropped as duplicates of a published message id.",
            registry=r,
        )
        self.runs = Gauge("mpijc_rules_runs", "Runs the rules engine holds in memory.", registry=r)
        self.replayed = Counter(
            "mpijc_rules_replayed",
            "Events folded into the rules engine by warm starts, unpublished.",
            registry=r,
        )
        self.partitions = Gauge(
            "mpijc_rules_partitions", "Partitions of the rules this replica runs.", registry=r
        )
        self.urgent = Counter(
            "mpijc_rules_urgent",
            "Failure signals folded in through the urgent lane, ahead of the partition's durable.",
            registry=r,
        )


@dataclass(frozen=True)
class WarmStart:
    """What a warm start read and what it had to publish."""

    replayed: int
    skipped: int
    upto_sequence: int
    published_known: int
    """Finding ids read from FINDINGS (after the snapshot's findings sequence, if there is one)."""
    reconciled: int
    seconds: float
    partition: int | None = None
    snapshot_sequence: int = 0
    """JOBS sequence the loaded snapshot covered (0: none, a full replay)."""
    snapshot_runs: int = 0
    caught_up: int = 0
    """Of ``replayed``, events the previous holder had not acknowledged: their changes were published."""


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


class RulesService:
    """One rules engine, the findings it owes the bus, and the lock that orders them."""

    def __init__(
        self,
        engine: RuleEngine,
        js: JetStreamContext,
        topology: Topology,
        metrics: RulesMetrics,
        clock: Clock,
        *,
        partition: tuple[int, int] | None = None,
        snapshots: SnapshotStore | None = None,
        publish_retry_s: float = PUBLISH_RETRY_S,
    ) -> None:
        self.engine = engine
        self._js = js
        self._topology = topology
        self._publisher = Publisher(js, topology, publish_retry_s)
        self._metrics = metrics
        self._clock = EventClock(clock)
        self._lock = asyncio.Lock()
        self._outbox: list[Finding] = []
        self._partition = partition
        self._snapshots = snapshots
        self._dirty: set[str] = set()
        self.folded = 0
        """JOBS stream sequence up to which every event of this service's partition is folded in."""
        self._findings_seen = 0
        """FINDINGS stream sequence up to which the engine's findings are the bus's (each change
        published is acknowledged at a sequence; a warm start reads the bus up to one)."""

    @property
    def unpublished(self) -> int:
        """Finding changes computed but not yet acknowledged by JetStream."""
        return len(self._outbox)

    def owns(self, subject: str) -> bool:
        """Whether a JOBS subject belongs to this service's partition (any, if not partitioned)."""
        if self._partition is None:
            return True
        index, count = self._partition
        return self._topology.job_partition(subject, count) == index

    async def observe(
        self, events: Sequence[BusEvent], upto: int | None = None, *, ahead: bool = False
    ) -> int:
        """Fold a batch in and publish its changes; raises :class:`RetryableError` if any
        change could not be published (it stays queued and goes out with the next call).

        ``upto``: the JOBS stream sequence the batch reaches; with a snapshot store, the runs
        it changed and that sequence are written once every change is published.
        ``ahead``: the events come before their turn (the urgent lane): each is judged at its
        own time, but the clock of the runs still behind them does not move, or a backlog
        of ordinary updates would look minutes late and fire hang rules."""
        async with self._lock:
            self._outbox.extend(
                self.engine.observe_all((event, self._time_of(event, ahead)) for event in events)
            )
            self._dirty.update(job_of(event).uid for event in events)
            if upto is not None:
                self.folded = max(self.folded, upto)
            stored = await self._flush()
            await self._save()
            return stored

    def _time_of(self, event: BusEvent, ahead: bool) -> datetime:
        """When ``event`` is judged: its own time when it comes ahead of its turn, else the clock
        advanced by it."""
        if ahead:
            return event.observed_at
        self._clock.advance(event.observed_at)
        return self._clock()

    async def advance(self, upto: int) -> None:
        """Nothing of this partition up to JOBS sequence ``upto`` is left to fold (saved next time)."""
        async with self._lock:
            self.folded = max(self.folded, upto)

    async def checkpoint(self) -> None:
        """Publish what is owed and write the snapshot now (before handing the partition over)."""
        async with self._lock:
            await self._flush()
            await self._pass_findings()
            await self._save()

    async def tick(self) -> int:
        """Re-evaluate the live runs at the clock's ``now`` and publish what changed."""
        async with self._lock:
            changes = self.engine.tick(self._clock())
            self._dirty.update(f.job.uid for f in changes)
            self._outbox.extend(changes)
            stored = await self._flush()
            await self._pass_findings()
            await self._save()
            return stored

    async def warm_start(self, batch: int = REPLAY_BATCH, live_after: int | None = None) -> WarmStart:
        """Rebuild the engine (from the snapshot, then the JOBS stream after it), then publish
        only what the bus lacks.

        ``live_after``: the JOBS sequence up to which the events were handled (their findings
        published) by whoever ran this partition before — the ack floor of its durable. Events
        after it are observed as they would have been live, and what they change is published
        with the revisions the previous holder gave it (duplicates collapse on ``Nats-Msg-Id``);
        ``None`` replays everything silently (then reconciling catches up, as on a first start).

        Call before the durable subscriber starts (see the module docstring)."""
        started = time.monotonic()
        async with self._lock:
            held = Snapshot(0, 0, None)
            if self._snapshots is not None:
                held = await self._snapshots.load(self.engine)
                if held.newest is not None:
                    self._clock.advance(held.newest)
            # the bus up to the snapshot's findings sequence: the snapshot's firing findings
            # (it is written only once all its changes are on the bus)
            on_bus = {finding.id: finding for finding in self.engine.firing()}
            upto = await self._last_sequence("jobs")
            live = upto if live_after is None else max(live_after, held.sequence)
            replayed, skipped, caught_up = await self._replay(held.sequence + 1, upto, batch, live)
            if self._outbox:
                await self._flush()  # on the bus before it is compared with the bus
            now = self._clock()
            ticked = self.engine.tick(now)  # the present, compared with the bus below
            published, seen = await self._published(batch, held.findings_sequence)
            self._findings_seen = max(self._findings_seen, seen)
            owed = self.engine.reconcile(on_bus | published, now)
            self._outbox.extend(owed)
            self.folded = max(upto, held.sequence)
            # what changed since the snapshot: the runs replayed (marked as they were folded),
            # those whose findings moved with time or were lined up with the bus; the others
            # are in the snapshot as they are (rewriting them all took seconds on a big cluster)
            self._dirty.update(f.job.uid for f in (*ticked, *owed, *published.values()))
            try:
                await self._flush()
                await self._save()
            except RetryableError as exc:
                log.warning("warm start: %s; they go out with the first batch or tick", exc)
        report = WarmStart(
            replayed,
            skipped,
            upto,
            len(published),
            len(owed),
            time.monotonic() - started,
            partition=self._partition[0] if self._partition else None,
            snapshot_sequence=held.sequence,
            snapshot_runs=held.runs,
            caught_up=caught_up,
        )
        log.info(
            "rules warm start%s: %d runs from the snapshot up to sequence %d, %d events replayed "
            "(%d skipped, %d of them new) up to sequence %d, %d findings read from the bus, %d published "
            "to catch up, %.2fs",
            f" of partition {report.partition}" if report.partition is not None else "",
            report.snapshot_runs,
            report.snapshot_sequence,
            report.replayed,
            report.skipped,
            report.caught_up,
            report.upto_sequence,
            report.published_known,
            report.reconciled,
            report.seconds,
        )
        return report

    # ----------------------------------------------------------------- private

    async def _save(self) -> None:
        """Write the snapshot, if there is a store and every computed change is on the bus."""
        if self._snapshots is None:
            self._dirty.clear()
            return
        if self._outbox:
            return
        dirty, self._dirty = self._dirty, set()
        try:
            await self._snapshots.save(
                self.engine, self.folded, self._clock.newest, dirty, self._findings_seen
            )
        except Exception as exc:
            self._dirty |= dirty
            raise RetryableError(f"rules snapshot not written: {exc!r}") from exc

    async def _pass_findings(self) -> None:
        """Move the findings sequence to the end of FINDINGS: with nothing owed (just flushed,
        under the lock), what is there of this partition is in the engine, and what other
        partitions published need not be read by the next warm start. On ticks, not per batch:
        a partition that publishes nothing for a week would otherwise leave the week to read."""
        self._findings_seen = max(self._findings_seen, await self._last_sequence("findings"))

    async def _flush(self) -> int:
        """Publish the outbox, pipelined; keep what failed. Returns how many were stored."""
        if self._partition is None:
            self._metrics.runs.set(len(self.engine))
        if not self._outbox:
            return 0
        pending, self._outbox = self._outbox, []
        results = await self._publisher.acked([self._publisher.finding(finding) for finding in pending])
        error: BaseException | None = None
        stored = 0
        failed: list[Finding] = []
        for finding, result in zip(pending, results, strict=True):
            if isinstance(result, BaseException):
                failed.append(finding)
                error = error or result
                continue
            self._findings_seen = max(self._findings_seen, result.seq)
            if result.duplicate:
                self._metrics.duplicates.inc()
            else:
                stored += 1
                self._metrics.findings.labels(finding.rule, finding.status).inc()
        if failed:
            self._outbox = failed + self._outbox
            raise RetryableError(f"{len(failed)} finding changes not published: {error!r}")
        return stored

    async def _replay(self, start: int, upto: int, batch: int, live: int) -> tuple[int, int, int]:
        """Observe the JOBS stream from ``start`` up to ``upto`` at event time, only this
        service's partition; the changes of events after sequence ``live`` go to the outbox,
        the others are dropped (already published). Returns (events, skipped, events after ``live``)."""
        replayed = skipped = caught_up = 0
        last_tick: datetime | None = None
        async for msg in self._read("jobs", upto, batch, start):
            if not self.owns(msg.subject):
                continue
            try:
                event = parse_event(msg.data)
            except ValidationError:
                skipped += 1
                continue
            # Event time, never going back: roughly what the first process saw when live.
            self._clock.advance(event.observed_at)
            now = self._clock()
            self._dirty.add(job_of(event).uid)
            if msg.metadata.sequence.stream > live:
                self._outbox.extend(self.engine.observe(event, now))
                caught_up += 1
                replayed += 1
                continue
            if last_tick is None:
                last_tick = now
            elif now - last_tick >= timedelta(seconds=REPLAY_TICK_S):
                self.engine.tick(now)
                last_tick = now
            self.engine.observe(event, now)
            replayed += 1
        self._metrics.replayed.inc(replayed)
        return replayed, skipped, caught_up

    async def _published(self, batch: int, after: int = 0) -> tuple[dict[str, Finding], int]:
        """The last change of each finding id on the FINDINGS stream after sequence ``after``
        (a snapshot's findings sequence: the bus up to it is in the snapshot), and the
        sequence read up to."""
        published: dict[str, Finding] = {}
        upto = await self._last_sequence("findings")
        async for msg in self._read("findings", upto, batch, after + 1):
            try:
                finding = parse_finding(msg.data)
            except ValidationError:
                continue
            held = published.get(finding.id)
            if held is None or finding.revision >= held.revision:
                published[finding.id] = finding
        return published, max(upto, after)

    async def _last_sequence(self, family: StreamFamily) -> int:
        return await last_sequence(self._js, self._topology.stream(family))

    def _read(self, family: StreamFamily, upto: int, batch: int, start: int = 1) -> AsyncIterator[Msg]:
        """Messages of a stream from sequence ``start`` (or its first) up to ``upto``, without acks."""
        stream, subject = self._topology.stream(family), self._topology.wildcard(family)
        return read_stream(self._js, stream, subject, upto, batch, start)


async def run_ticker(
    service: RulesService, interval_s: float, stop: asyncio.Event, *, at_once: bool = True
) -> None:
    """Tick at once (or, ``at_once`` False, after ``interval_s``: a warm start has just ticked),
    then every ``interval_s``, until ``stop`` is set."""
    if not at_once:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)
    while not stop.is_set():
        try:
            await service.tick()
        except RetryableError as exc:
            log.warning("rules tick: %s", exc)
        except Exception:  # one bad run must not stop the time-based rules for all
            log.exception("rules tick failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)


def durable(
    topology: Topology,
    thresholds: RuleThresholds,
    js: JetStreamContext,
    metrics: PipelineMetrics,
    clock: Clock,
) -> tuple[Durable[BusEvent], RulesService]:
    """One unpartitioned durable ``rules`` on ``jobs.>``, and the service behind it.

    Await :meth:`RulesService.warm_start` before running it, and run :func:`run_ticker` beside
    it. (``consume --only rules`` runs the partitioned :class:`RulesReplica` instead.)"""
    service = RulesService(RuleEngine(thresholds), js, topology, RulesMetrics.on(metrics.registry), clock)

    async def apply(events: Sequence[BusEvent]) -> None:
        await service.observe(events)

    return Durable("jobs", CONSUMER, parse_event, apply), service


@dataclass
class _Claimed:
    """A partition this replica runs: its service, its pullers and its loops."""

    service: RulesService
    warm: WarmStart
    stop: asyncio.Event
    tasks: list[asyncio.Task[None]]
    durable: Puller
    urgent: Puller
    """The partition's lane for failure signals (:meth:`RulesReplica._pull_urgent`)."""

    def interrupt(self) -> None:
        """Stop the loops: a wait for messages ends at once, a batch in hand is finished."""
        self.stop.set()
        self.durable.interrupt()
        self.urgent.interrupt()


class RulesReplica:
    """One replica of the partitioned rules consumer (see the module docstring, "Partitions").

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
        dead_letter: DeadLetterer,
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
        self._dead_letter = dead_letter
        self._metrics = metrics
        self._rules_metrics = RulesMetrics.on(metrics.registry)
        self._clock = clock
        self._tick_s = tick_s if tick_s is not None else settings.rules_tick_s
        self.replica = replica or replica_name()
        self.partitions = settings.rules_partitions
        self.claimed: dict[int, _Claimed] = {}
        self.warm_starts: list[WarmStart] = []
        self._leases: Leases | None = None
        self._state: KeyValue | None = None
        self._turn = asyncio.Lock()
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
        self._state = await state_bucket(self._js, self._topology, self._replicas)
        self._leases = Leases(
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
        old = self._topology.durable(CONSUMER)  # the single-replica durable of earlier versions
        if await remove_durable(self._js, self._topology.stream("jobs"), old):
            log.info("rules: removed the unpartitioned durable %s", old)
        await self.rebalance()

    async def run(self, stop: asyncio.Event) -> None:
        """Renew and rebalance until ``stop``; then hand every partition back."""
        try:
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.heartbeat_s)
                if stop.is_set():
                    break
                self._raise_if_a_loop_failed()
                try:
                    await self.rebalance()
                except Exception:  # NATS restarting: the next heartbeat tries again
                    log.exception("rules replica %s: rebalancing failed", self.replica)
        except asyncio.CancelledError:
            for claimed in self.claimed.values():  # a crash: the leases simply expire
                claimed.stop.set()
                for task in claimed.tasks:
                    task.cancel()
            raise
        await self.leave()

    def _raise_if_a_loop_failed(self) -> None:
        """A partition's loop that died (its durable deleted, say) takes the replica down with it
        rather than leaving the partition claimed and unread."""
        for partition, claimed in self.claimed.items():
            for task in claimed.tasks:
                if task.done() and not task.cancelled() and (failure := task.exception()) is not None:
                    raise RuntimeError(f"rules partition {partition}: {task.get_name()} failed") from failure

    async def leave(self) -> None:
        """Stop every partition and hand it back."""
        async with self._turn:
            for partition in list(self.claimed):
                await self._drop(partition, release=True)
            if self._leases is not None:
                with contextlib.suppress(Exception):
                    await self._leases.leave()

    async def rebalance(self) -> None:
        """Say we are alive, keep our leases, give up the surplus, claim our share."""
        assert self._leases is not None, "start() first"
        async with self._turn:
            leases = self._leases
            share = await leases.heartbeat()
            for partition in list(self.claimed):
                if not await leases.renew(partition):
                    await self._drop(partition, release=False)
            for partition in sorted(self.claimed, reverse=True)[: max(len(self.claimed) - share, 0)]:
                await self._drop(partition, release=True)
            # start where this replica's name points, so replicas starting together spread out
            first = zlib.crc32(self.replica.encode()) % self.partitions
            won: list[int] = []
            for step in range(self.partitions):
                if len(self.claimed) + len(won) >= share:
                    break
                partition = (first + step) % self.partitions
                if partition not in self.claimed and await leases.claim(partition):
                    won.append(partition)
            # the partitions won warm-start side by side: a restart is as long as the longest one
            started = await self._renewing(
                leases, asyncio.gather(*(self._run_partition(p) for p in won), return_exceptions=True)
            )
            for partition, outcome in zip(won, started, strict=True):
                if isinstance(outcome, Exception):  # NATS trouble: let it go, try again next heartbeat
                    log.error(
                        "rules replica %s: partition %d failed to start",
                        self.replica,
                        partition,
                        exc_info=outcome,
                    )
                    await leases.release(partition)
                elif isinstance(outcome, BaseException):
                    raise outcome
            self._rules_metrics.partitions.set(len(self.claimed))
            self._rules_metrics.runs.set(sum(len(c.service.engine) for c in self.claimed.values()))

    async def _renewing(self, leases: Leases, work: Awaitable[T]) -> T:
        """``work`` (warm starts: seconds on a big cluster), renewing every lease held meanwhile;
        a warm start longer than the lease TTL lost the partitions it was starting, and the
        replica started them all over again. A renewal in flight when the work ends is finished,
        not cancelled: cancelled, its new revision would be unknown and the next renewal fail."""
        finished = asyncio.Event()

        async def renew() -> None:
            while not finished.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(finished.wait(), self.heartbeat_s)
                if finished.is_set():
                    return
                try:
                    await leases.heartbeat()
                    for partition in leases.held:
                        await leases.renew(partition)
                except Exception as exc:  # NATS restarting: the next heartbeat tries again
                    log.warning("rules replica %s: renewing leases while warming: %r", self.replica, exc)

        renewer = asyncio.create_task(renew())
        try:
            return await work
        finally:
            finished.set()
            await renewer

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
        # None, a new partition: everything before now is old news
        live_after = await ack_floor(self._js, self._topology.stream("jobs"), durable)
        warm = await service.warm_start(live_after=live_after)
        self.warm_starts.append(warm)
        jobs, settings = self._topology.stream("jobs"), self._settings
        pulled = await Puller.open(
            self._nc,
            jobs,
            durable,
            replace(consumer_config(settings), filter_subject=self._topology.wildcard("jobs")),
            batch=settings.batch_size,
            wait_s=settings.pull_wait_s,
            heartbeat_s=settings.pull_heartbeat_s,
        )
        urgent = await Puller.open(
            self._nc,
            jobs,
            f"{durable}_urgent",
            lane_config(settings, self._topology.urgent_job_events()),
            batch=settings.batch_size,
            wait_s=settings.pull_wait_s,
            heartbeat_s=settings.pull_heartbeat_s,
        )
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(self._pull(service, pulled, stop), name=f"rules-p{partition}"),
            asyncio.create_task(
                run_ticker(service, self._tick_s, stop, at_once=False), name=f"rules-tick-p{partition}"
            ),
            asyncio.create_task(self._pull_urgent(service, urgent, stop), name=f"rules-urgent-p{partition}"),
        ]
        self.claimed[partition] = _Claimed(service, warm, stop, tasks, pulled, urgent)

    async def _drop(self, partition: int, *, release: bool) -> None:
        claimed = self.claimed.pop(partition)
        claimed.interrupt()
        _, pending = await asyncio.wait(claimed.tasks, timeout=_STOP_TIMEOUT_S)
        for task in pending:
            task.cancel()
        await asyncio.gather(*claimed.tasks, return_exceptions=True)
        if release:  # the next holder resumes from here
            with contextlib.suppress(Exception):
                await claimed.service.checkpoint()
        for puller in (claimed.durable, claimed.urgent):
            await puller.close()
        if release and self._leases is not None:
            await self._leases.release(partition)
        log.info("rules replica %s stopped partition %d", self.replica, partition)

    async def _pull_urgent(self, service: RulesService, urgent: Puller, stop: asyncio.Event) -> None:
        """The lane of failure signals (``jobs.*.*.urgent``) of one partition: fold them in at once.

        Behind a relist of thousands of pods, a pod OOM-killed now would wait its turn on the
        partition's durable. This lane folds it in as soon as it is published, without moving
        the folded sequence: the durable still reaches it in stream order and folds it again,
        which changes nothing (the state keeps the newest version of each object), and a
        restart replays it from the snapshot's sequence like any other event. So the lane may
        lose nothing that matters: whatever fails here is acknowledged and left to the durable."""
        while not stop.is_set():
            msgs = await urgent.pull()
            events: list[BusEvent] = []
            for msg in msgs:
                if service.owns(msg.subject) and msg.metadata.sequence.stream > service.folded:
                    with contextlib.suppress(ValidationError):  # the durable dead-letters it
                        events.append(parse_event(msg.data))
            if events:
                try:
                    await service.observe(events, ahead=True)
                    self._rules_metrics.urgent.inc(len(events))
                except Exception as exc:  # left to the durable; unpublished changes stay queued
                    log.warning("rules: urgent lane: %r", exc)
            for msg in msgs:
                with contextlib.suppress(Exception):
                    await msg.ack()

    async def _pull(self, service: RulesService, durable: Puller, stop: asyncio.Event) -> None:
        """The durable of one partition: fold its events, acknowledge the others'."""
        settings = self._settings
        while not stop.is_set():
            msgs = await durable.pull()
            if not msgs:
                continue
            mine: list[Msg] = []
            top = 0
            for msg in msgs:
                seq = msg.metadata.sequence.stream
                top = max(top, seq)
                if not service.owns(msg.subject) or (seq <= service.folded and not service.unpublished):
                    await msg.ack()  # another partition's, or folded in already (and published)
                else:
                    mine.append(msg)
            if not mine:
                await service.advance(top)
                continue

            async def apply(events: Sequence[BusEvent], upto: int = top) -> None:
                await service.observe(events, upto)

            settler = BatchSettler(
                CONSUMER,
                parse_event,
                apply,
                self._dead_letter,
                self._metrics,
                settings.max_deliver,
                settings.retry_delay_s,
            )
            await settler.settle(mine)


async def attach(wiring: Wiring) -> Role:
    """The rules role: one replica of the partitioned consumer, claiming its share before it returns."""
    settings = wiring.settings
    replica = RulesReplica(
        wiring.topology,
        settings.consumer,
        settings.rules,
        wiring.nc,
        wiring.dead_letter(CONSUMER),
        wiring.metrics,
        wiring.clock,
        replicas=settings.nats.replicas,
        publish_retry_s=settings.nats.publish_retry_s,
    )
    await replica.start()
    log.info("rules replica %s runs partitions %s", replica.replica, sorted(replica.claimed))
    return Role(background=(replica.run,))
