"""Prometheus metrics: every group of series has one shape, on a registry the entry point makes.

Nothing is registered at import time. A :class:`MetricGroup` subclass declares its series in
``__init__`` on the registry it is given; :meth:`MetricGroup.on` returns the group already
registered on a registry (a consumer built twice on one registry, in a restart in-process or
a test, reuses its series instead of failing on duplicates). :class:`PipelineMetrics` is the
process's group, built once per process and passed down; its registry is the one served on
``/metrics``.
"""

from __future__ import annotations

import weakref
from typing import ClassVar, Self

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["MetricGroup", "PipelineMetrics"]


class MetricGroup:
    """Series registered together on one registry."""

    _held: ClassVar[weakref.WeakKeyDictionary[CollectorRegistry, dict[type, MetricGroup]]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        MetricGroup._held.setdefault(self.registry, {})[type(self)] = self

    @classmethod
    def on(cls, registry: CollectorRegistry) -> Self:
        """This group on ``registry``: the one registered there already, or a new one."""
        held = MetricGroup._held.get(registry, {}).get(cls)
        return held if isinstance(held, cls) else cls(registry)

    def sample(self, name: str, **labels: str) -> float:
        """The current value of one sample (``mpijc_watch_events_total``, …), 0 if never set."""
        return self.registry.get_sample_value(name, labels) or 0.0


class PipelineMetrics(MetricGroup):
    """Counters and histograms of the pipeline stages (other groups add theirs to the same registry)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
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
        self.unpublished = Counter(
            "mpijc_unpublished",
            "Events given up on after the bus's publish retries, by type (progress probes: the "
            "next probe reports the same lines).",
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
