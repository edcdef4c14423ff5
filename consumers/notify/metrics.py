"""The notify consumer's and dispatcher's Prometheus series, on the process registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.metrics import MetricGroup


class NotifyMetrics(MetricGroup):
    """Deliveries by outcome, attempt latency, queue depth."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.enqueued = Counter(
            "mpijc_notify_enqueued",
            "Deliveries written to the outbox, by channel and event type.",
            ["channel", "type"],
            registry=r,
        )
        self.deliveries = Counter(
            "mpijc_notify_deliveries",
            "Delivery attempts by channel and outcome (delivered, retry, failed = dead letter).",
            ["channel", "outcome"],
            registry=r,
        )
        self.attempt_seconds = Histogram(
            "mpijc_notify_attempt_seconds",
            "Duration of one delivery attempt (request to response headers, or SMTP send).",
            ["channel"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.queue_depth = Gauge(
            "mpijc_notify_queue_depth", "Deliveries pending (due or waiting to retry).", registry=r
        )
        self.in_flight = Gauge(
            "mpijc_notify_in_flight", "Deliveries this dispatcher is sending now.", registry=r
        )
        self.claims = Counter(
            "mpijc_notify_claims",
            "Queries a dispatcher ran for due deliveries (each woken dispatcher runs one).",
            registry=r,
        )
        self.disabled = Counter(
            "mpijc_notify_endpoints_disabled",
            "Subscriptions disabled automatically (failing too long, or 410 Gone).",
            registry=r,
        )


class AlertmanagerMetrics(MetricGroup):
    """The Alertmanager sink: POSTs by outcome, their latency, each Alertmanager's health, alerts owed."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        self.requests = Counter(
            "mpijc_alertmanager_requests",
            "POSTs to an Alertmanager by outcome (sent; retry: unreachable, timed out or 5xx/429; "
            "rejected: 4xx, not repeated).",
            ["alertmanager", "outcome"],
            registry=r,
        )
        self.alerts_sent = Counter(
            "mpijc_alertmanager_alerts_sent",
            "Alerts an Alertmanager accepted, firing and resolved, resends included.",
            ["alertmanager"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "mpijc_alertmanager_request_seconds",
            "Duration of one POST to an Alertmanager.",
            ["alertmanager"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.up = Gauge(
            "mpijc_alertmanager_up",
            "1 when the last POST to this Alertmanager was accepted, 0 while it fails.",
            ["alertmanager"],
            registry=r,
        )
        self.alerts = Gauge(
            "mpijc_alertmanager_alerts",
            "Alerts held for the Alertmanagers: firing, or resolved and not yet taken by all (resolving).",
            ["state"],
            registry=r,
        )
