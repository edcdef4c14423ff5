"""One rules engine on the bus: bus events in, findings out, at least once.

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

Run partitioned, one service per partition (:mod:`consumers.rules.replica`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic import ValidationError

from consumers.rules.engine import RuleEngine
from consumers.rules.eventclock import EventClock
from consumers.rules.metrics import RulesMetrics
from consumers.rules.snapshot import Snapshot, SnapshotStore
from consumers.rules.thresholds import RuleThresholds
from controller.bus.client import JetStreamContext, Msg
from controller.bus.consuming import Durable
from controller.bus.publishing import PUBLISH_RETRY_S, Publisher
from controller.bus.reading import last_sequence, read_stream
from controller.contract.clock import Clock, pause
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent, job_of, parse_event
from controller.contract.findings import Finding, parse_finding
from controller.contract.phases import Phases
from controller.contract.subjects import RULES_DURABLE, StreamFamily, Topology
from controller.contract.turns import Turns
from controller.metrics import PipelineMetrics

__all__ = [
    "CONSUMER",
    "REPLAY_BATCH",
    "TICK_INTERVAL_S",
    "RulesService",
    "WarmStart",
    "durable",
    "run_ticker",
]

log = logging.getLogger(__name__)

CONSUMER = RULES_DURABLE

TICK_INTERVAL_S = 5.0
"""Seconds between ticks: the time-based rules fire at most this late (thresholds are minutes)."""
REPLAY_BATCH = 1000
"""Messages per fetch while warm-starting."""
REPLAY_TICK_S = 300.0
"""Event-time seconds between ticks of the replay: only to forget finished runs on the way."""


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
            changes = await self._tick(self._clock())
            self._dirty.update(f.job.uid for f in changes)
            self._outbox.extend(changes)
            stored = await self._flush()
            await self._pass_findings()
            await self._save()
            return stored

    async def warm_start(
        self, batch: int = REPLAY_BATCH, live_after: int | None = None, phases: Phases | None = None
    ) -> WarmStart:
        """Rebuild the engine (from the snapshot, then the JOBS stream after it), then publish
        only what the bus lacks.

        ``live_after``: the JOBS sequence up to which the events were handled (their findings
        published) by whoever ran this partition before — the ack floor of its durable. Events
        after it are observed as they would have been live, and what they change is published
        with the revisions the previous holder gave it (duplicates collapse on ``Nats-Msg-Id``);
        ``None`` replays everything silently (then reconciling catches up, as on a first start).

        Call before the durable subscriber starts (see the module docstring). ``phases``: each
        step's time is marked there (:mod:`controller.contract.phases`)."""
        started = time.monotonic()
        phases = phases if phases is not None else Phases()
        async with self._lock:
            held = Snapshot(0, 0, None)
            if self._snapshots is not None:
                held = await self._snapshots.load(self.engine, phases)
                if held.newest is not None:
                    self._clock.advance(held.newest)
            # the bus up to the snapshot's findings sequence: the snapshot's firing findings
            # (it is written only once all its changes are on the bus)
            on_bus = {finding.id: finding for finding in self.engine.firing()}
            upto = await self._last_sequence("jobs")
            phases.mark("jobs' last sequence")
            live = upto if live_after is None else max(live_after, held.sequence)
            replayed, skipped, caught_up = await self._replay(held.sequence + 1, upto, batch, live)
            phases.mark("replay")
            if self._outbox:
                await self._flush()  # on the bus before it is compared with the bus
                phases.mark("flush")
            now = self._clock()
            ticked = await self._tick(now)  # the present, compared with the bus below
            phases.mark("tick")
            published, seen = await self._published(batch, held.findings_sequence)
            phases.mark("read findings")
            self._findings_seen = max(self._findings_seen, seen)
            owed = self.engine.reconcile(on_bus | published, now)
            phases.mark("reconcile")
            self._outbox.extend(owed)
            self.folded = max(upto, held.sequence)
            # what changed since the snapshot: the runs replayed (marked as they were folded),
            # those whose findings moved with time or were lined up with the bus; the others
            # are in the snapshot as they are (rewriting them all took seconds on a big cluster)
            self._dirty.update(f.job.uid for f in (*ticked, *owed, *published.values()))
            try:
                await self._flush()
                phases.mark("flush")
                await self._save()
                phases.mark("save")
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

    async def _tick(self, now: datetime) -> list[Finding]:
        """:meth:`RuleEngine.tick` in turns (under the lock: nothing else reads the engine
        meanwhile), so that the leases are renewed and the other partitions go on beside a tick
        of hundreds of runs on a loaded machine."""
        changes: list[Finding] = []
        turns = Turns()
        for of_run in self.engine.ticking(now):
            changes += of_run
            await turns.take()
        return changes

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
        turns = Turns()  # a fetch brings a thousand events, folded one after the other
        async for msg in self._read("jobs", upto, batch, start):
            await turns.take()
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
                await self._tick(now)
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
        turns = Turns()
        async for msg in self._read("findings", upto, batch, after + 1):
            await turns.take()
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
        await pause(stop, interval_s)
    while not stop.is_set():
        try:
            await service.tick()
        except RetryableError as exc:
            log.warning("rules tick: %s", exc)
        except Exception:  # one bad run must not stop the time-based rules for all
            log.exception("rules tick failed")
        await pause(stop, interval_s)


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
