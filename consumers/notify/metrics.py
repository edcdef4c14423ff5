"""The notify consumer's and dispatcher's Prometheus series, on the process registry."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.metrics import once_per_registry


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
        """The series on ``registry``, registered once however often a consumer is built on it."""
        return _notifymetrics_on(registry)


def _build_notifymetrics(registry: CollectorRegistry) -> NotifyMetrics:
    return NotifyMetrics(
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


_notifymetrics_on = once_per_registry(_build_notifymetrics)
