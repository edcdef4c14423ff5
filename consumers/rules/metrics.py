"""The rules consumer's own Prometheus series, on the registry of the process."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from controller.metrics import MetricGroup

__all__ = ["RulesMetrics"]


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
        self.partitions = Gauge(
            "mpijc_rules_partitions", "Partitions of the rules this replica runs.", registry=r
        )
        self.urgent = Counter(
            "mpijc_rules_urgent",
            "Failure signals folded in through the urgent lane, ahead of the partition's durable.",
            registry=r,
        )
