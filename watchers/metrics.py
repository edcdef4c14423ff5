"""Prometheus metrics of the watch loops, on an explicit registry.

Nothing is registered at import time: an entry point builds one :class:`WatchMetrics` on the
registry it serves on ``/metrics`` and passes it to every watch loop; a test builds its own on
a fresh registry and reads samples back with :meth:`WatchMetrics.sample`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.metrics import MetricGroup

__all__ = ["UsageMetrics", "WatchMetrics"]


class WatchMetrics(MetricGroup):
    """Counters and gauges of the watch loops, labelled by resource (``str(Resource)``)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.events = Counter(
            "mpijc_watch_events",
            "Changes passed on by the watch loops, by resource and type (ADDED/MODIFIED/DELETED).",
            ["resource", "type"],
            registry=self.registry,
        )
        self.bookmarks = Counter(
            "mpijc_watch_bookmarks",
            "BOOKMARK events received (they only advance the resourceVersion).",
            ["resource"],
            registry=self.registry,
        )
        self.lists = Counter(
            "mpijc_watch_lists",
            "Completed lists: the first one, then one per relist after 410 Gone.",
            ["resource"],
            registry=self.registry,
        )
        self.relists = Counter(
            "mpijc_watch_relists",
            "Relists after the watch's resourceVersion expired (410 Gone).",
            ["resource"],
            registry=self.registry,
        )
        self.skipped = Counter(
            "mpijc_watch_skipped",
            "Watch events or listed objects skipped: malformed (no metadata.uid) or of an unknown type.",
            ["resource", "reason"],
            registry=self.registry,
        )
        self.errors = Counter(
            "mpijc_watch_errors",
            "Failed list/watch calls that led to a reconnect with backoff, by error class.",
            ["resource", "error"],
            registry=self.registry,
        )
        self.known = Gauge(
            "mpijc_watch_known_objects",
            "Objects the watch loop currently knows (what a relist compares against).",
            ["resource"],
            registry=self.registry,
        )
        self.log_follows = Gauge(
            "mpijc_log_follows",
            "Container logs followed now (at most MPIJC_LOGS__MAX_FOLLOWS), and those wanted beyond it.",
            ["state"],
            registry=self.registry,
        )
        self.log_lines = Counter(
            "mpijc_log_lines",
            "Log lines stored on LOGS by the follower.",
            registry=self.registry,
        )
        self.log_partitions = Gauge(
            "mpijc_log_partitions",
            "Follow partitions this watcher replica holds a lease on (of MPIJC_LOGS__PARTITIONS): "
            "it follows the runs that hash to them.",
            registry=self.registry,
        )
        self.log_reopened = Counter(
            "mpijc_log_reopened",
            "Follows opened again from their stored position, by why (broken: the stream or the bus "
            "failed; ended: it ended while its container ran; superseded: another replica stored a "
            "batch of it meanwhile, the follow stops and the partition's holder goes on).",
            ["reason"],
            registry=self.registry,
        )
        self.log_capped = Counter(
            "mpijc_log_capped_runs",
            "Runs whose log reached MPIJC_LOGS__RUN_MAX_BYTES: no longer followed.",
            registry=self.registry,
        )
        self.log_share_evictions = Counter(
            "mpijc_log_share_evictions",
            "Times a namespace passed MPIJC_LOGS__NAMESPACE_MAX_BYTES on LOGS and its own oldest "
            "lines (a sixteenth of its share each) were evicted.",
            registry=self.registry,
        )


class UsageMetrics(MetricGroup):
    """Queries to the cluster's Prometheus for what the jobs used (:mod:`watchers.usage`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.queries = Counter(
            "mpijc_usage_queries",
            "Requests to Prometheus by outcome: ok, retried (timed out or 429/5xx, tried again), "
            "unavailable (given up after the retries), rejected (4xx, a query it refuses).",
            ["outcome"],
            registry=self.registry,
        )
        self.query_seconds = Histogram(
            "mpijc_usage_query_seconds",
            "Seconds one request to Prometheus took.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.up = Gauge(
            "mpijc_usage_prometheus_up",
            "1 when the last refresh read every namespace it tried, 0 when Prometheus failed it.",
            registry=self.registry,
        )
        self.pods = Gauge(
            "mpijc_usage_pods",
            "Pods whose usage is read: running, and ended awaiting their final reading.",
            registry=self.registry,
        )
        self.readings = Counter(
            "mpijc_usage_readings",
            "Pod figures published (final: a pod's whole life, after it ended).",
            ["final"],
            registry=self.registry,
        )

    def observe(self, outcome: str, seconds: float) -> None:
        """Count one request to Prometheus and how long it took."""
        self.queries.labels(outcome).inc()
        self.query_seconds.observe(seconds)
