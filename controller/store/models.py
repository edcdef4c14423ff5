"""PostgreSQL schema of the store (the engines come from :mod:`controller.store.engine`).

One row per run (job uid); attempts of the same job name are numbered and linked to the
previous attempt. Pod state history and the job timeline are append-only and keyed so
that replaying a stream inserts nothing new. The schema itself is built by Alembic
(``migrations/``); these models are what the migrations must match (``alembic check``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

JSON = dict[str, Any]


class Base(DeclarativeBase):
    type_annotation_map = {JSON: JSONB, list[Any]: JSONB, datetime: DateTime(timezone=True)}


class Run(Base):
    """One training job object (any kind of :mod:`controller.contract.kinds`), identified by its uid."""

    __tablename__ = "runs"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    previous_uid: Mapped[str | None] = mapped_column(String(64))
    phase: Mapped[str] = mapped_column(String(16))
    resource_version: Mapped[int] = mapped_column(BigInteger)
    conditions: Mapped[list[Any]]
    spec: Mapped[JSON]
    manifest: Mapped[str | None] = mapped_column(Text)
    """The job as submitted, YAML, redacted, at most 64 KiB (migration 0016)."""
    labels: Mapped[JSON]
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    deleted_at: Mapped[datetime | None]
    first_observed_at: Mapped[datetime]
    last_observed_at: Mapped[datetime]

    __table_args__ = (
        Index("ix_runs_ns_name_created", "namespace", "name", "created_at"),
        Index("ix_runs_created", "created_at"),
        Index("ix_runs_phase", "phase"),
        # migration 0005: the API's label selector (labels @> …) and name filter across namespaces
        Index(
            "ix_runs_labels", "labels", postgresql_using="gin", postgresql_ops={"labels": "jsonb_path_ops"}
        ),
        Index("ix_runs_name_created", "name", "created_at"),
    )


class PodRow(Base):
    """Latest known state of one launcher or worker pod."""

    __tablename__ = "pods"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    role: Mapped[str] = mapped_column(String(16))
    replica: Mapped[str | None] = mapped_column(String(16))
    """The replica type of a training-operator job's pod (``Master``, ``PS``); None for other kinds."""
    index: Mapped[int | None]
    phase: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    node: Mapped[str | None] = mapped_column(String(253))
    resource_version: Mapped[int] = mapped_column(BigInteger)
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    containers: Mapped[list[Any]]
    resources: Mapped[JSON]
    created_at: Mapped[datetime]
    last_observed_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]


class PodStateRow(Base):
    """Every observed version of a pod: the pod state history."""

    __tablename__ = "pod_states"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    pod_uid: Mapped[str] = mapped_column(String(64))
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    resource_version: Mapped[int] = mapped_column(BigInteger)
    phase: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    node: Mapped[str | None] = mapped_column(String(253))
    containers: Mapped[list[Any]]
    log_tail: Mapped[list[Any]]
    observed_at: Mapped[datetime]

    __table_args__ = (Index("uq_pod_states_pod_rv", "pod_uid", "resource_version", unique=True),)


class PodUsageRow(Base):
    """What one launcher or worker pod used, read from the cluster's Prometheus: refreshed while it
    runs, ``final`` once read over its whole life after it ended; kept after the pod is deleted."""

    __tablename__ = "pod_usage"

    pod_uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    role: Mapped[str] = mapped_column(String(16))
    index: Mapped[int | None]
    since: Mapped[datetime]
    until: Mapped[datetime]
    final: Mapped[bool] = mapped_column(Boolean)
    gpus: Mapped[list[Any] | None]
    gpu_util_curve: Mapped[list[Any]]
    memory_max_bytes: Mapped[float | None] = mapped_column(Float)
    memory_limit_bytes: Mapped[float | None] = mapped_column(Float)
    memory_curve: Mapped[list[Any]]
    cpu_mean_cores: Mapped[float | None] = mapped_column(Float)
    cpu_max_cores: Mapped[float | None] = mapped_column(Float)
    cpu_requested_cores: Mapped[float | None] = mapped_column(Float)
    observed_at: Mapped[datetime]


class K8sEventRow(Base):
    """Latest version of one Kubernetes Event about a run or its pods."""

    __tablename__ = "k8s_events"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    reason: Mapped[str] = mapped_column(String(128))
    message: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(String(16))
    involved_kind: Mapped[str] = mapped_column(String(64))
    involved_name: Mapped[str] = mapped_column(String(253))
    count: Mapped[int] = mapped_column(Integer)
    first_timestamp: Mapped[datetime | None]
    last_timestamp: Mapped[datetime | None]
    resource_version: Mapped[int] = mapped_column(BigInteger)


class TimelineEntryRow(Base):
    """One line of a run's timeline: a phase transition, a pod change or a Kubernetes event."""

    __tablename__ = "timeline"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_uid: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime]
    source: Mapped[str] = mapped_column(String(16))
    summary: Mapped[str] = mapped_column(Text)
    detail: Mapped[JSON]
    dedup_key: Mapped[str] = mapped_column(Text, unique=True)

    __table_args__ = (Index("ix_timeline_run_at", "run_uid", "at"),)


class FindingRow(Base):
    """Latest revision of one finding (one per run and rule)."""

    __tablename__ = "findings"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    namespace: Mapped[str] = mapped_column(String(253))
    job_name: Mapped[str] = mapped_column(String(253))
    rule: Mapped[str] = mapped_column(String(32), index=True)
    severity: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    root_cause: Mapped[str] = mapped_column(Text)
    evidence: Mapped[list[Any]]
    remediation: Mapped[list[Any]]
    doc_anchor: Mapped[str] = mapped_column(Text)
    revision: Mapped[int] = mapped_column(Integer)
    superseded_by: Mapped[str | None] = mapped_column(String(32))
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    resolved_at: Mapped[datetime | None]

    __table_args__ = (Index("ix_findings_ns_status", "namespace", "status"),)


class AuditRow(Base):
    """One audit record: append-only (a trigger refuses UPDATE and DELETE) and hash-chained.

    ``record`` is the :class:`~controller.contract.audit.AuditRecord` as JSON, exactly what the hash
    covers; the other columns are copies of its fields for filtering, checked against it by
    :func:`controller.store.auditverification.verify`. See ``docs/audit.md``.
    """

    __tablename__ = "audit_records"

    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    event_id: Mapped[str] = mapped_column(String(255), unique=True)
    recorded_at: Mapped[datetime]
    at: Mapped[datetime]
    namespace: Mapped[str | None] = mapped_column(String(253))
    source: Mapped[str] = mapped_column(String(16))
    verb: Mapped[str] = mapped_column(String(16))
    kind: Mapped[str | None] = mapped_column(String(64))
    name: Mapped[str | None] = mapped_column(String(253))
    object_uid: Mapped[str | None] = mapped_column(String(64))
    username: Mapped[str | None] = mapped_column(Text)
    record: Mapped[JSON]
    prev_hash: Mapped[str] = mapped_column(String(64))
    hash: Mapped[str] = mapped_column(String(64))

    __table_args__ = (
        Index("ix_audit_records_ns_at", "namespace", "at"),
        Index("ix_audit_records_at", "at"),
        Index("ix_audit_records_object_uid", "object_uid"),
    )


class WatchChangeRow(Base):
    """A job version the watch stream showed, to corroborate admission records against.

    Kept a day (and the newest version of every job that still exists, the base its next change
    is compared with); see :mod:`controller.store.corroboration`.
    """

    __tablename__ = "watch_changes"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    resource_version: Mapped[str] = mapped_column(String(64), primary_key=True)
    change: Mapped[str] = mapped_column(String(16), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253))
    kind: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(253))
    observed_at: Mapped[datetime]
    generation: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime | None]
    spec: Mapped[JSON | None]
    labels: Mapped[JSON | None]

    __table_args__ = (
        Index("ix_watch_changes_object", "namespace", "kind", "name", "observed_at"),
        Index("ix_watch_changes_uid", "uid", "observed_at"),
    )


VERDICTS = ("verified", "contradicted", "unmatched", "unobservable", "unjudged", "disputed")
"""What :mod:`controller.store.corroboration` can decide about an admission record."""


class AdmissionCorroboration(Base):
    """The verdict on one admission record; ``claim`` names the watched change that bore it out,
    unique: one change bears out one record."""

    __tablename__ = "admission_corroborations"

    audit_seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    status: Mapped[str] = mapped_column(String(16))
    observed_at: Mapped[datetime | None]
    decided_at: Mapped[datetime]
    claim: Mapped[str | None] = mapped_column(String(160))
    resource_version: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str | None] = mapped_column(Text)
    rival: Mapped[int | None] = mapped_column(BigInteger)
    """The record that held the change this one claims too (``disputed``, or ``verified`` when this
    one, from the API server's certificate, took it over; ``unmatched`` naming the holder)."""

    __table_args__ = (
        CheckConstraint(
            f"status IN ({', '.join(repr(v) for v in VERDICTS)})", name="ck_admission_corroborations_status"
        ),
        Index("uq_admission_corroborations_claim", "claim", unique=True),
        Index("ix_admission_corroborations_rival", "rival"),
    )


class AuditExportCursor(Base):
    """How far one exporter (sink) has shipped the audit chain: the last ``seq`` it delivered."""

    __tablename__ = "audit_export_cursors"

    sink: Mapped[str] = mapped_column(String(512), primary_key=True)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    exported: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[datetime]


# --------------------------------------------------------------------------- notifications


class SubscriptionRow(Base):
    """Who wants to hear about which jobs: a webhook endpoint or email recipients, with filters."""

    __tablename__ = "subscriptions"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    channel: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    namespace: Mapped[str | None] = mapped_column(String(253))
    job_name: Mapped[str | None] = mapped_column(String(253))
    label_selector: Mapped[str | None] = mapped_column(Text)
    event_types: Mapped[list[Any]]
    rules: Mapped[list[Any]]
    severities: Mapped[list[Any]]
    url: Mapped[str | None] = mapped_column(Text)
    recipients: Mapped[list[Any]]
    secret: Mapped[str | None] = mapped_column(Text)
    previous_secret: Mapped[str | None] = mapped_column(Text)
    previous_secret_until: Mapped[datetime | None]
    one_shot: Mapped[bool] = mapped_column(Boolean)
    expires_at: Mapped[datetime | None]
    fired_at: Mapped[datetime | None]
    description: Mapped[str] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
    failing_since: Mapped[datetime | None]
    disabled_at: Mapped[datetime | None]
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    creator: Mapped[JSON | None]
    """The creator's identity as the API authenticated them (uid, groups, extra attributes),
    to re-check their access; ``None`` for subscriptions made before it was recorded."""
    format: Mapped[str] = mapped_column(String(32), server_default="standard")

    __table_args__ = (Index("ix_subscriptions_state_ns", "state", "namespace"),)


class DeliveryRow(Base):
    """One notification owed to one subscription: the outbox row the dispatcher sends and retries."""

    __tablename__ = "deliveries"

    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(40), unique=True)
    subscription_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("subscriptions.id", ondelete="CASCADE")
    )
    channel: Mapped[str] = mapped_column(String(16))
    event_type: Mapped[str] = mapped_column(String(32))
    order_key: Mapped[str] = mapped_column(Text)
    namespace: Mapped[str] = mapped_column(String(253))
    job_name: Mapped[str] = mapped_column(String(253))
    job_uid: Mapped[str] = mapped_column(String(64))
    body: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    next_attempt_at: Mapped[datetime]
    leased_until: Mapped[datetime | None]
    """Until when a dispatcher holds the row (in no index: a claim is a HOT update)."""
    event_at: Mapped[datetime]
    created_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    last_status_code: Mapped[int | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    last_latency_ms: Mapped[float | None] = mapped_column(Float)

    __table_args__ = (
        Index("ix_deliveries_due", "next_attempt_at", "seq", postgresql_where=text("status = 'pending'")),
        Index(
            "ix_deliveries_chain",
            "subscription_id",
            "order_key",
            "seq",
            postgresql_where=text("status = 'pending'"),
        ),
        Index("ix_deliveries_sub_seq", "subscription_id", "seq"),
        {"postgresql_with": {"fillfactor": 50}},  # room on each page for claims' HOT updates
    )


class DeliveryAttemptRow(Base):
    """One try of one delivery: the delivery log's status codes and latencies."""

    __tablename__ = "delivery_attempts"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    delivery_seq: Mapped[int] = mapped_column(
        BigInteger, ForeignKey("deliveries.seq", ondelete="CASCADE"), index=True
    )
    attempt: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime]
    outcome: Mapped[str] = mapped_column(String(16))
    status_code: Mapped[int | None]
    latency_ms: Mapped[float] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)


class SubscriptionNotice(Base):
    """Something the owner of a subscription must learn without it (an endpoint was disabled)."""

    __tablename__ = "subscription_notices"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    subscription_id: Mapped[str] = mapped_column(
        String(40), ForeignKey("subscriptions.id", ondelete="CASCADE"), index=True
    )
    kind: Mapped[str] = mapped_column(String(32))
    message: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime]


class NotifyJob(Base):
    """What the notify consumer last saw of a job, to tell phase transitions from repeats."""

    __tablename__ = "notify_jobs"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    kind: Mapped[str] = mapped_column(String(16))
    phase: Mapped[str] = mapped_column(String(16))
    labels: Mapped[JSON]
    resource_version: Mapped[int] = mapped_column(BigInteger)
    deleted: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime | None]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]


class NotifyFinding(Base):
    """What the notify consumer last saw of a finding, to tell firing/resolved from updates."""

    __tablename__ = "notify_findings"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    revision: Mapped[int] = mapped_column(Integer)


class NotifyAlert(Base):
    """A finding pushed to the Alertmanagers: firing (``ends_at`` null) or resolved and not yet
    accepted by every Alertmanager (``resolved_to`` lists those that did)."""

    __tablename__ = "notify_alerts"
    __table_args__ = (Index("ix_notify_alerts_change", "change"),)

    finding_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    labels: Mapped[JSON]
    annotations: Mapped[JSON]
    generator_url: Mapped[str] = mapped_column(Text)
    starts_at: Mapped[datetime]
    ends_at: Mapped[datetime | None]
    resolved_to: Mapped[list[Any]] = mapped_column(server_default=text("'[]'::jsonb"))
    updated_at: Mapped[datetime]
    change: Mapped[int] = mapped_column(BigInteger, server_default=text("nextval('notify_alerts_change')"))
