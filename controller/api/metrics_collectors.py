"""Figures the API computes when Prometheus scrapes it: from the database and from JetStream.

The history store is the truth about jobs, so "jobs by phase", "run durations" and "findings
by rule" are read from it on scrape instead of being kept by a consumer (history consumers
scale horizontally and are redelivered messages: a gauge kept in each of them would be
partial, and a counter could count twice). The run-duration histogram counts every stored
finished run, so it only grows as runs finish, as Prometheus expects of a histogram.
JetStream's own consumer info gives the consumers' backlog and redeliveries.

Both are computed at most once per ``ttl_s`` (several Prometheus replicas cost one query),
by :meth:`ScrapeCollector.refresh`, which the ``/metrics`` route awaits before rendering;
``collect()`` — called by ``prometheus_client`` synchronously — only returns the cached
families. A failed refresh keeps the previous figures and sets ``mpijc_scrape_ok`` to 0: one
series per source in one family (:class:`ScrapeStatus`), since a family named twice in one
exposition is invalid (``promtool check metrics`` refuses it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.backlog import backlog
from controller.bus.client import JetStreamContext
from controller.bus.streams import FAMILIES
from controller.contract.subjects import Topology
from controller.metrics import MetricGroup
from controller.store import queries, subscriptions

__all__ = ["RUN_DURATION_BUCKETS", "JetStreamCollector", "ScrapeCollector", "ScrapeStatus", "StoreCollector"]

log = logging.getLogger(__name__)

RUN_DURATION_BUCKETS: tuple[float, ...] = (60, 300, 900, 1800, 3600, 7200, 14400, 43200, 86400, 259200)
"""Seconds, created → finished: from a one-minute smoke test to a three-day training run."""


class ScrapeStatus(MetricGroup):
    """``mpijc_scrape_ok{source}``: one family for every :class:`ScrapeCollector` of a registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.ok = Gauge(
            "mpijc_scrape_ok",
            "1 if the figures from this source were refreshed on the last try.",
            ["source"],
            registry=self.registry,
        )


class ScrapeCollector(Collector):
    """A collector whose families are computed asynchronously, at most once per ``ttl_s``."""

    source = "unknown"

    def __init__(self, registry: CollectorRegistry, ttl_s: float) -> None:
        self._ttl_s = ttl_s
        self._families: list[Metric] = []
        self._ok = ScrapeStatus.on(registry).ok.labels(self.source)
        self._refreshed_at = -float("inf")
        self._lock = asyncio.Lock()
        registry.register(self)

    async def compute(self) -> list[Metric]:
        """The current families (subclasses)."""
        raise NotImplementedError

    async def refresh(self) -> None:
        """Recompute the families if they are older than ``ttl_s``."""
        async with self._lock:
            if time.monotonic() - self._refreshed_at < self._ttl_s:
                return
            try:
                self._families = await self.compute()
                self._ok.set(1)
            except Exception:
                log.warning(
                    "could not refresh %s metrics; serving the previous figures", self.source, exc_info=True
                )
                self._ok.set(0)
            self._refreshed_at = time.monotonic()

    def collect(self) -> Iterator[Metric]:
        yield from self._families


class StoreCollector(ScrapeCollector):
    """Jobs by phase, run durations, findings by rule and subscriptions by state, from the store."""

    source = "database"

    def __init__(self, engine: AsyncEngine, registry: CollectorRegistry, ttl_s: float) -> None:
        self._engine = engine
        super().__init__(registry, ttl_s)

    async def compute(self) -> list[Metric]:
        async with self._engine.connect() as conn:
            phases = await queries.jobs_by_phase(conn)
            durations = await queries.run_duration_histogram(conn, RUN_DURATION_BUCKETS)
            findings = await queries.findings_by_rule(conn)
            states = await subscriptions.count_by_state(conn)
        jobs = _gauge(
            "mpijc_jobs",
            "Runs not deleted yet, by namespace, kind and phase.",
            ["namespace", "kind", "phase"],
            phases,
        )
        histogram = HistogramMetricFamily(
            "mpijc_run_duration_seconds",
            "Created → finished of every stored finished run, by kind and outcome.",
            labels=["kind", "outcome"],
        )
        for kind, outcome, cumulative, count, total in durations:
            buckets = [
                (_le(bound), float(n)) for bound, n in zip(RUN_DURATION_BUCKETS, cumulative, strict=True)
            ]
            histogram.add_metric([kind, outcome], [*buckets, ("+Inf", float(count))], total)
        by_rule = _gauge(
            "mpijc_findings",
            "Stored findings by rule, severity and status (firing or resolved).",
            ["rule", "severity", "status"],
            findings,
        )
        subs = _gauge(
            "mpijc_subscriptions",
            "Notification subscriptions by state (active, disabled, suspended: their creator lost "
            "read access, expired) and channel.",
            ["state", "channel"],
            states,
        )
        return [jobs, histogram, by_rule, subs]


def _gauge(
    name: str, documentation: str, labels: list[str], rows: Iterable[Sequence[Any]]
) -> GaugeMetricFamily:
    """A gauge family with one sample per row: the row's label values, then its value."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for *values, value in rows:
        family.add_metric(values, value)
    return family


def _le(bound: float) -> str:
    return str(float(bound))


class JetStreamCollector(ScrapeCollector):
    """Backlog and redeliveries of every durable consumer on this installation's streams."""

    source = "jetstream"

    def __init__(
        self, js: JetStreamContext, topology: Topology, registry: CollectorRegistry, ttl_s: float
    ) -> None:
        self._js = js
        self._topology = topology
        super().__init__(registry, ttl_s)

    async def compute(self) -> list[Metric]:
        streams = await backlog(self._js, {self._topology.stream(family) for family in FAMILIES})
        messages = GaugeMetricFamily(
            "mpijc_jetstream_stream_messages", "Messages kept in a stream.", labels=["stream"]
        )
        families: dict[str, GaugeMetricFamily] = {
            "pending": GaugeMetricFamily(
                "mpijc_jetstream_consumer_pending",
                "Messages in the stream the consumer has not been delivered yet (its backlog).",
                labels=["stream", "consumer"],
            ),
            "ack_pending": GaugeMetricFamily(
                "mpijc_jetstream_consumer_ack_pending",
                "Messages delivered and not acknowledged yet.",
                labels=["stream", "consumer"],
            ),
            "redelivered": GaugeMetricFamily(
                "mpijc_jetstream_consumer_redelivered",
                "Unacknowledged messages delivered more than once (failing or slow handlers).",
                labels=["stream", "consumer"],
            ),
        }
        for stream in streams:
            messages.add_metric([stream.name], stream.messages)
            for consumer in stream.consumers:
                labels = [stream.name, consumer.name]
                families["pending"].add_metric(labels, consumer.pending)
                families["ack_pending"].add_metric(labels, consumer.ack_pending)
                families["redelivered"].add_metric(labels, consumer.redelivered)
        return [messages, *families.values()]


async def refresh_all(collectors: Sequence[ScrapeCollector]) -> None:
    """Refresh every collector concurrently (each at most once per its TTL)."""
    await asyncio.gather(*(c.refresh() for c in collectors))
