"""The notify consumer's and dispatcher's Prometheus series, on the process registry."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


@dataclass(frozen=True)
class NotifyMetrics:
    """Deliveries by outcome, attempt latency, queue depth; registered once per registry."""

    enqueued: Counter
    deliveries: Counter
    attempt_seconds: Histogram
    queue_depth: Gauge
    in_flight: Gauge
    disabled: Counter

    @classmethod
    def on(cls, registry: CollectorRegistry) -> NotifyMetrics:
        """The series on ``registry``, however often a consumer or dispatcher is built on it."""
        held = _METRICS.get(registry)
        if held is None:
            held = _METRICS[registry] = cls(
                enqueued=Counter(
                    "mpijc_notify_enqueued",
                    "Deliveries written to the outbox, by channel and event type.",
                    ["channel", "type"],
                    registry=registry,
                ),
                deliveries=Counter(
                    "mpijc_notify_deliveries",
                    "Delivery attempts by channel and outcome (delivered, retry, failed = dead letter).",
                    ["channel", "outcome"],
                    registry=registry,
                ),
                attempt_seconds=Histogram(
                    "mpijc_notify_attempt_seconds",
                    "Duration of one delivery attempt (request to response headers, or SMTP send).",
                    ["channel"],
                    registry=registry,
                    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
                ),
                queue_depth=Gauge(
                    "mpijc_notify_queue_depth",
                    "Deliveries pending (due or waiting to retry).",
                    registry=registry,
                ),
                in_flight=Gauge(
                    "mpijc_notify_in_flight", "Deliveries this dispatcher is sending now.", registry=registry
                ),
                disabled=Counter(
                    "mpijc_notify_endpoints_disabled",
                    "Subscriptions disabled automatically (failing too long, or 410 Gone).",
                    registry=registry,
                ),
            )
        return held


_METRICS: weakref.WeakKeyDictionary[CollectorRegistry, NotifyMetrics] = weakref.WeakKeyDictionary()
