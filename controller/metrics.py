"""Prometheus metrics of the pipeline, on an explicit registry made by each entry point.

Nothing is registered at import time: :class:`PipelineMetrics` is built once per process
and passed down, and tests build their own.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram


@dataclass
class PipelineMetrics:
    """Counters and histograms of the pipeline stages (the watch loops add theirs to the same registry)."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        self.skipped_objects = Counter(
            "mpijc_skipped_objects",
            "Objects skipped as malformed or unknown, by reason.",
            ["reason"],
            registry=r,
        )
        self.published = Counter(
            "mpijc_published",
            "Events published to the bus (new, not duplicates), by type.",
            ["type"],
            registry=r,
        )
        self.uncorrelated = Counter(
            "mpijc_uncorrelated", "Pods and events dropped because no run claimed them.", registry=r
        )
        self.consumed = Counter(
            "mpijc_consumed", "Messages processed and acknowledged, by consumer.", ["consumer"], registry=r
        )
        self.dead_letters = Counter(
            "mpijc_dead_letters",
            "Messages sent to the dead-letter subject, by consumer and reason.",
            ["consumer", "reason"],
            registry=r,
        )
        self.redeliveries = Counter(
            "mpijc_redeliveries",
            "Messages negatively acknowledged for redelivery, by consumer.",
            ["consumer"],
            registry=r,
        )
        self.batch_seconds = Histogram(
            "mpijc_batch_seconds",
            "Time to process one pulled batch, by consumer.",
            ["consumer"],
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.watch_lag = Histogram(
            "mpijc_watch_lag_seconds",
            "Seconds from a watcher observing a change to its publication on the bus (includes the "
            "wait for an unknown job's pods/events to be claimed), by event type.",
            ["type"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.db_write_seconds = Histogram(
            "mpijc_db_write_seconds",
            "Seconds one INSERT/UPDATE/DELETE statement (or executemany batch) took, by statement.",
            ["statement"],
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )


T = TypeVar("T")


def once_per_registry(build: Callable[[CollectorRegistry], T]) -> Callable[[CollectorRegistry], T]:
    """``build(registry)`` at most once per registry: a consumer built twice on one registry
    (a restart in-process, a test) reuses its series instead of failing on duplicates."""
    held: weakref.WeakKeyDictionary[CollectorRegistry, T] = weakref.WeakKeyDictionary()

    def on(registry: CollectorRegistry) -> T:
        if registry not in held:
            held[registry] = build(registry)
        return held[registry]

    return on
