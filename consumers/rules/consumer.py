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
One replica only: the engine's state is per process, and two replicas would split each
run's events between them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from faststream.nats import NatsRouter
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import ValidationError

from consumers.rules.engine import RuleEngine
from consumers.rules.thresholds import RuleThresholds
from consumers.wiring import Role, Wiring
from controller.bus.publishing import Publisher, publish
from controller.bus.settling import DeadLetterer, subscribe_batches
from controller.contract.clock import Clock
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent, parse_event
from controller.contract.findings import Finding, parse_finding
from controller.contract.settings import ConsumerSettings
from controller.contract.subjects import StreamFamily, Topology
from controller.metrics import MetricGroup, PipelineMetrics

log = logging.getLogger(__name__)

CONSUMER = "rules"

TICK_INTERVAL_S = 5.0
"""Seconds between ticks: the time-based rules fire at most this late (thresholds are minutes)."""
REPLAY_BATCH = 1000
"""Messages per fetch while warm-starting."""
REPLAY_TICK_S = 300.0
"""Event-time seconds between ticks of the replay: only to forget finished runs on the way."""
_REPLAY_FETCH_TIMEOUT_S = 2.0
_REPLAY_IDLE_S = 30.0  # the server deletes an abandoned replay consumer after this


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


@dataclass(frozen=True)
class WarmStart:
    """What a warm start read and what it had to publish."""

    replayed: int
    skipped: int
    upto_sequence: int
    published_known: int
    reconciled: int
    seconds: float


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
    ) -> None:
        self.engine = engine
        self._js = js
        self._topology = topology
        self._publisher = Publisher(js, topology)
        self._metrics = metrics
        self._clock = EventClock(clock)
        self._lock = asyncio.Lock()
        self._outbox: list[Finding] = []

    @property
    def unpublished(self) -> int:
        """Finding changes computed but not yet acknowledged by JetStream."""
        return len(self._outbox)

    async def observe(self, events: Sequence[BusEvent]) -> int:
        """Fold a batch in and publish its changes; raises :class:`RetryableError` if any
        change could not be published (it stays queued and goes out with the next call)."""
        async with self._lock:
            for event in events:
                self._clock.advance(event.observed_at)
                self._outbox.extend(self.engine.observe(event, self._clock()))
            return await self._flush()

    async def tick(self) -> int:
        """Re-evaluate the live runs at the clock's ``now`` and publish what changed."""
        async with self._lock:
            self._outbox.extend(self.engine.tick(self._clock()))
            return await self._flush()

    async def warm_start(self, batch: int = REPLAY_BATCH) -> WarmStart:
        """Rebuild the engine from the JOBS stream, then publish only what the bus lacks.

        Call before the durable subscriber starts (see the module docstring)."""
        started = time.monotonic()
        async with self._lock:
            upto = await self._last_sequence("jobs")
            replayed, skipped = await self._replay(upto, batch)
            now = self._clock()
            self.engine.tick(now)  # the present, compared with the bus below
            published = await self._published(batch)
            owed = self.engine.reconcile(published, now)
            self._outbox.extend(owed)
            try:
                await self._flush()
            except RetryableError as exc:
                log.warning("warm start: %s; they go out with the first batch or tick", exc)
        report = WarmStart(replayed, skipped, upto, len(published), len(owed), time.monotonic() - started)
        log.info(
            "rules warm start: %d events replayed (%d skipped) up to sequence %d, %d findings on the "
            "bus, %d published to catch up, %.2fs",
            report.replayed,
            report.skipped,
            report.upto_sequence,
            report.published_known,
            report.reconciled,
            report.seconds,
        )
        return report

    # ----------------------------------------------------------------- private

    async def _flush(self) -> int:
        """Publish the outbox, pipelined; keep what failed. Returns how many were stored."""
        self._metrics.runs.set(len(self.engine))
        if not self._outbox:
            return 0
        pending, self._outbox = self._outbox, []
        results = await publish(self._js, [self._publisher.finding(finding) for finding in pending])
        error: BaseException | None = None
        stored = 0
        failed: list[Finding] = []
        for finding, result in zip(pending, results, strict=True):
            if isinstance(result, BaseException):
                failed.append(finding)
                error = error or result
            elif result.duplicate:
                self._metrics.duplicates.inc()
            else:
                stored += 1
                self._metrics.findings.labels(finding.rule, finding.status).inc()
        if failed:
            self._outbox = failed + self._outbox
            raise RetryableError(f"{len(failed)} finding changes not published: {error!r}")
        return stored

    async def _replay(self, upto: int, batch: int) -> tuple[int, int]:
        """Observe the JOBS stream up to ``upto`` at event time, unpublished: (events, skipped)."""
        replayed = skipped = 0
        last_tick: datetime | None = None
        async for msg in self._read("jobs", upto, batch):
            try:
                event = parse_event(msg.data)
            except ValidationError:
                skipped += 1
                continue
            # Event time, never going back: roughly what the first process saw when live.
            self._clock.advance(event.observed_at)
            now = self._clock()
            if last_tick is None:
                last_tick = now
            elif now - last_tick >= timedelta(seconds=REPLAY_TICK_S):
                self.engine.tick(now)
                last_tick = now
            self.engine.observe(event, now)
            replayed += 1
        self._metrics.replayed.inc(replayed)
        return replayed, skipped

    async def _published(self, batch: int) -> dict[str, Finding]:
        """The last change on the bus of each finding id, from the FINDINGS stream."""
        published: dict[str, Finding] = {}
        async for msg in self._read("findings", await self._last_sequence("findings"), batch):
            try:
                finding = parse_finding(msg.data)
            except ValidationError:
                continue
            held = published.get(finding.id)
            if held is None or finding.revision >= held.revision:
                published[finding.id] = finding
        return published

    async def _last_sequence(self, family: StreamFamily) -> int:
        info = await self._js.stream_info(self._topology.stream(family))
        return info.state.last_seq if info.state.messages else 0

    async def _read(self, family: StreamFamily, upto: int, batch: int) -> AsyncIterator[Msg]:
        """Messages of a stream from its first up to sequence ``upto``, without acks."""
        if upto <= 0:
            return
        stream = self._topology.stream(family)
        sub = await self._js.pull_subscribe(
            self._topology.wildcard(family),
            stream=stream,
            config=ConsumerConfig(
                ack_policy=JsAckPolicy.NONE,
                deliver_policy=DeliverPolicy.ALL,
                mem_storage=True,
                num_replicas=1,
                inactive_threshold=_REPLAY_IDLE_S,
            ),
        )
        name = (await sub.consumer_info()).name
        try:
            while True:
                try:
                    msgs = await sub.fetch(batch, timeout=_REPLAY_FETCH_TIMEOUT_S)
                except NatsTimeoutError:
                    return  # the rest aged out of the stream while we read
                for msg in msgs:
                    meta = msg.metadata
                    if meta.sequence.stream > upto:
                        return
                    yield msg
                    if meta.sequence.stream == upto or meta.num_pending == 0:
                        return
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            with contextlib.suppress(Exception):
                await self._js.delete_consumer(stream, name)


async def run_ticker(service: RulesService, interval_s: float, stop: asyncio.Event) -> None:
    """Tick at once, then every ``interval_s``, until ``stop`` is set."""
    while not stop.is_set():
        try:
            await service.tick()
        except RetryableError as exc:
            log.warning("rules tick: %s", exc)
        except Exception:  # one bad run must not stop the time-based rules for all
            log.exception("rules tick failed")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval_s)


def build_router(
    topology: Topology,
    settings: ConsumerSettings,
    thresholds: RuleThresholds,
    js: JetStreamContext,
    dead_letter: DeadLetterer,
    metrics: PipelineMetrics,
    clock: Clock,
) -> tuple[NatsRouter, RulesService]:
    """The rules subscriber, ready to be included in a broker, and the service behind it.

    Await :meth:`RulesService.warm_start` before starting the broker, and run
    :func:`run_ticker` beside it."""
    service = RulesService(RuleEngine(thresholds), js, topology, RulesMetrics.on(metrics.registry), clock)

    async def apply(events: Sequence[BusEvent]) -> None:
        await service.observe(events)

    router = NatsRouter()
    subscribe_batches(router, topology, "jobs", CONSUMER, settings, parse_event, apply, dead_letter, metrics)
    return router, service


async def attach(wiring: Wiring) -> Role:
    """The rules role: warm-started before its subscriber runs, ticking beside it."""
    settings = wiring.settings
    router, service = build_router(
        wiring.topology,
        settings.consumer,
        settings.rules,
        wiring.js,
        wiring.dead_letter(CONSUMER),
        wiring.metrics,
        wiring.clock,
    )
    log.info("rules warm start: %s", await service.warm_start())
    return Role(router, (lambda stop: run_ticker(service, settings.consumer.rules_tick_s, stop),))
