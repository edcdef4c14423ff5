"""The admission webhook's series, on the registry it serves at ``/metrics``."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from controller.metrics import MetricGroup

__all__ = ["AdmissionMetrics"]


class AdmissionMetrics(MetricGroup):
    """The webhook's series, on the registry it serves at ``/metrics``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        registry = self.registry
        self.reviews = Counter(
            "mpijc_admission_reviews",
            "AdmissionReviews answered, by operation and outcome (recorded, dry_run, ignored, malformed).",
            ["operation", "outcome"],
            registry=registry,
        )
        self.rejected = Counter(
            "mpijc_admission_bad_requests",
            "Requests refused, by status: 4xx, and 503 for a large body the pool could not hold.",
            ["status"],
            registry=registry,
        )
        self.connections = Gauge(
            "mpijc_admission_connections",
            "Connections open (at most admission.max_connections).",
            registry=registry,
        )
        self.connections_evicted = Counter(
            "mpijc_admission_connections_evicted",
            "Connections closed to make room for a new one beyond admission.max_connections (the one that "
            "had waited longest for its client).",
            registry=registry,
        )
        self.connections_refused = Counter(
            "mpijc_admission_connections_refused",
            "New connections closed unserved: admission.max_connections were all being answered.",
            registry=registry,
        )
        self.publish_failures = Counter(
            "mpijc_admission_publish_failures",
            "Audit records JetStream did not store in time (spooled, or kept in the backlog).",
            registry=registry,
        )
        self.backlog = Gauge(
            "mpijc_admission_backlog",
            "Audit records held in memory to be published again (the spool is unset or failing).",
            registry=registry,
        )
        self.spooled = Gauge(
            "mpijc_admission_spooled",
            "Audit records in the durable spool (admission.spool_dir), waiting for JetStream.",
            registry=registry,
        )
        self.spool_failures = Counter(
            "mpijc_admission_spool_failures",
            "Audit records the spool could not store (kept in memory instead).",
            registry=registry,
        )
        self.quota_checks = Counter(
            "mpijc_admission_quota_checks",
            "MPIJobs and TrainJobs being created, judged against their namespace's ResourceQuota and "
            "LimitRange, by outcome: fits, warned, denied, suspended (not judged), unjudged (a request "
            "or limit that is not a quantity: allowed with a warning), timeout (the API "
            "server did not answer within admission.quota_budget_s: allowed unchecked), throttled "
            "(over admission.quota_lookups_per_s: allowed unchecked), failed (it "
            "refused or failed the lookup: allowed unchecked).",
            ["outcome"],
            registry=registry,
        )
        self.dropped = Counter(
            "mpijc_admission_dropped",
            "Audit records dropped because the backlog was full.",
            registry=registry,
        )
