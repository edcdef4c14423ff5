"""Observations in, bus events out: the pipeline shared by live watching and replay.

Correlates raw observations with their runs (:mod:`watchers.correlating`), publishes what is
ready in one pipelined batch, and counts what had to be skipped. :func:`replay_files` feeds
capture files through exactly this path, so a replayed cluster and a live one produce the
same bus messages. :func:`publish_every` publishes what a periodic read returns (the progress
probes, the usage readings), counted the same way.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from controller.bus.publishing import Publisher
from controller.contract.clock import pause
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent
from controller.contract.settings import Settings
from controller.metrics import PipelineMetrics
from watchers.correlating import Correlator, Observation
from watchers.normalizing import MalformedObject
from watchers.recording import ReadStats, read_observations

log = logging.getLogger(__name__)

MAX_BATCH = 500

Unchanged = Callable[[str, str, str], bool]
"""Whether the object (event type, uid, resourceVersion) was already published at that version."""


class Pipeline:
    """Observations in, bus events out: correlate, publish, count."""

    def __init__(
        self,
        publish: Callable[[list[BusEvent]], Awaitable[int]],
        metrics: PipelineMetrics,
        pending_ttl_s: float,
        *,
        live: bool = True,
        stop: asyncio.Event | None = None,
        unchanged: Unchanged | None = None,
    ) -> None:
        """``unchanged`` tells an object already published at a version (event type, uid,
        resourceVersion): its observation is placed but not built, which is most of a restart's
        list beside a resumed watch (:meth:`watchers.published.VersionedPublisher.unchanged`)."""
        self._publish = publish
        self._stop = stop or asyncio.Event()
        self.metrics = metrics
        self._unchanged = unchanged
        self._m_unchanged = metrics.skipped_objects.labels("unchanged")
        self.correlator = Correlator(pending_ttl_s, time.monotonic, self._is_unchanged)
        self._live = live  # replayed observations carry historic times: no lag to measure

    async def feed(self, observations: Iterable[Observation], ready: Iterable[BusEvent] = ()) -> int:
        """Correlate and publish a batch of observations, after events ``ready`` as they are (the
        deletions a start tells from what was published); returns how many events were new."""
        ready = list(ready)
        for observation in observations:
            try:
                ready += self.correlator.observe(observation)
            except MalformedObject as exc:
                self.metrics.skipped_objects.labels("malformed").inc()
                log.warning("skipped malformed %s: %s", observation.kind, exc)
        dropped = self.correlator.expire()
        if dropped:
            self.metrics.uncorrelated.inc(dropped)
        if not ready:
            return 0
        new = await self._publish_until_stored(ready)
        self._count(ready)
        return new

    def _is_unchanged(self, observation: Observation) -> bool:
        if self._unchanged is None or observation.change == "DELETED" or observation.log_tail:
            return False
        meta = observation.object.get("metadata") or {}
        if self._unchanged(observation.kind, str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))):
            self._m_unchanged.inc()
            return True
        return False

    def _count(self, published: list[BusEvent]) -> None:
        """Published events by type, and (live) each one's watch lag: one series lookup per type."""
        for kind, count in Counter(event.type for event in published).items():
            self.metrics.published.labels(kind).inc(count)
        if not self._live:
            return
        now = datetime.now(UTC)
        lag: dict[str, Callable[[float], None]] = {}
        for event in published:
            observe = lag.get(event.type) or lag.setdefault(
                event.type, self.metrics.watch_lag.labels(event.type).observe
            )
            observe(max(0.0, (now - event.observed_at).total_seconds()))

    async def _publish_until_stored(self, ready: list[BusEvent]) -> int:
        """Publish until stored, past the bus's own bounded retry (a server lost, a leader moving:
        :func:`controller.bus.publishing.publish_acked` backs off between tries): nothing observed
        is dropped, and JetStream drops what a retry repeats. Gives up only once ``stop`` is set."""
        while True:
            try:
                return await self._publish(ready)
            except RetryableError as exc:
                if self._stop.is_set():
                    raise
                log.warning("%d events not published yet, retrying: %s", len(ready), exc)


async def replay_files(
    paths: Iterable[Path], settings: Settings, publisher: Publisher, metrics: PipelineMetrics
) -> ReadStats:
    """Feed capture files (or ``kubectl get -w -o json`` output) through the same pipeline.

    Several files are merged into one timeline by ``observed_at`` (each file is in time order),
    as one cluster would have produced them: the rules measure time across all of them.
    """
    stats = ReadStats()
    pipeline = Pipeline(publisher.publish, metrics, settings.watcher.pending_ttl_s, live=False)
    streams = [
        read_observations(
            path,
            log_tail_lines=settings.watcher.log_tail_lines,
            log_tail_bytes=settings.watcher.log_tail_bytes,
            stats=stats,
        )
        for path in paths
    ]
    batch: list[Observation] = []
    for observation in heapq.merge(*streams, key=lambda o: o.observed_at):
        batch.append(observation)
        if len(batch) >= MAX_BATCH:
            await pipeline.feed(batch)
            batch = []
    await pipeline.feed(batch)
    metrics.skipped_objects.labels("malformed").inc(stats.malformed)
    metrics.skipped_objects.labels("unknown_kind").inc(stats.unknown_kind)
    return stats


async def publish_every(
    read: Callable[[], Awaitable[Sequence[BusEvent]]],
    publisher: Publisher,
    metrics: PipelineMetrics,
    kind: str,
    interval_s: float,
    stop: asyncio.Event,
) -> None:
    """Every ``interval_s`` until ``stop``, ``read`` and publish what it returns, counted as
    ``kind`` (the progress probes, the usage readings). Never the watcher's end: a read that
    fails is logged and the next one tries again; what the bus did not store within its retries
    is counted and dropped, and the next read covers the same span again."""
    while not stop.is_set():
        await pause(stop, interval_s)
        if stop.is_set():
            return
        try:
            events = await read()
        except Exception:
            log.exception("%s: reading failed, again in %gs", kind, interval_s)
            continue
        if not events:
            continue
        try:
            metrics.published.labels(kind).inc(await publisher.publish(events))
        except RetryableError as exc:
            metrics.unpublished.labels(kind).inc(len(events))
            log.warning(
                "%d %s events not published, next read in %gs: %s", len(events), kind, interval_s, exc
            )
