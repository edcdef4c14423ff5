"""Response models of the API: what the OpenAPI schema promises, field by field, for every route.

The run routes' models (:class:`RunSummary`, :class:`RunDetail`, :class:`Comparison`, …) live in
:mod:`controller.contract.runs`, where the Python client reads them too, and are named here again;
the rest are the API's own. Built from the read side's rows and dataclasses (:mod:`controller.store.queries`,
:mod:`controller.store.subscriptions`, :mod:`controller.store.outbox`,
:mod:`controller.store.auditchain`) with ``from_attributes``; the job spec, conditions and
evidence reuse the bus's own models, so a field means the same thing on the bus, in the
database and here. Every list is a :class:`~controller.api.paging.Page`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from controller.api.paging import Page
from controller.contract.events import ContainerState, JobPhase
from controller.contract.notifications import Channel, DeliveryStatus, SubscriptionState
from controller.contract.runs import (  # the run routes' models, shared with the client
    ComparedRun,
    Comparison,
    Durations,
    FailureCause,
    Finding,
    FindingList,
    GpuUsage,
    Pod,
    PodIdentity,
    PodSummary,
    PodUsage,
    RunDetail,
    RunPage,
    RunSummary,
    SpecField,
    Termination,
    UsageLine,
)

__all__ = [
    "AuditLink",
    "AuditPage",
    "BrokenLink",
    "ChainVerification",
    "ComparedRun",
    "Comparison",
    "CreatedSubscription",
    "Delivery",
    "DeliveryAttempt",
    "DeliveryJob",
    "DeliveryPage",
    "DurationStats",
    "Durations",
    "FailureCause",
    "Finding",
    "FindingList",
    "GpuUsage",
    "K8sEvent",
    "Notice",
    "Pod",
    "PodHistory",
    "PodStateEntry",
    "PodSummary",
    "PodUsage",
    "RotatedSecret",
    "RunDetail",
    "RunPage",
    "RunSummary",
    "SpecField",
    "Subscription",
    "SubscriptionDetail",
    "SubscriptionPage",
    "Termination",
    "Timeline",
    "TimelineEntry",
    "Trend",
    "TrendPoint",
    "UsageLine",
]


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True, frozen=True)


class TimelineEntry(_Out):
    """One line of a run's timeline: a phase change, a pod change, a Kubernetes event or a finding."""

    at: datetime
    source: str = Field(description="`job`, `pod`, `event` or `finding`.")
    summary: str
    detail: dict[str, Any]


class PodStateEntry(_Out):
    """One observed version of a pod."""

    observed_at: datetime
    phase: str
    reason: str | None
    node: str | None
    containers: list[ContainerState]


class PodHistory(PodIdentity):
    """Every observed state of one pod, oldest first."""

    states: list[PodStateEntry]


class K8sEvent(_Out):
    """A Kubernetes Event about the run or one of its pods (latest version)."""

    reason: str
    message: str
    event_type: str
    involved_kind: str
    involved_name: str
    count: int
    first_timestamp: datetime | None
    last_timestamp: datetime | None


class Timeline(_Out):
    """Everything that happened to a run, in time order, and the same facts per pod."""

    uid: str
    entries: list[TimelineEntry]
    pods: list[PodHistory]
    events: list[K8sEvent]
    findings: list[Finding]


class TrendPoint(_Out):
    """One run of the job, with its durations."""

    uid: str
    attempt: int
    phase: JobPhase
    created_at: datetime
    durations: Durations
    memory_peak_ratio: float | None = Field(
        default=None, description="Highest working set of any of its pods over that pod's limit."
    )
    gpu_util_mean_pct: float | None = Field(default=None, description="Mean GPU utilization of its workers.")


class DurationStats(_Out):
    """Created → finished of the finished runs, in seconds."""

    mean: float
    p50: float
    p95: float
    max: float


class Trend(_Out):
    """How one job name did over its last runs."""

    namespace: str
    name: str
    runs: int
    finished: int
    failed: int
    failure_rate: float | None = Field(description="failed / finished; null while none has finished.")
    total_duration_s: DurationStats | None = Field(description="Null while none has finished.")
    points: list[TrendPoint] = Field(description="Oldest first.")


# --------------------------------------------------------------------------- subscriptions


def _deprecated_next(param: str) -> Any:
    """A page's ``next``: the same position as ``next_cursor``, for the deprecated ``param``."""
    return Field(
        description="Deprecated alias kept for existing clients: the same position as `next_cursor`, "
        f"for the deprecated `{param}` parameter. Use `next_cursor` and `cursor`.",
        json_schema_extra={"deprecated": True},
    )


class Notice(_Out):
    """Something the notifier wants the subscription's owner to know: why it was disabled,
    suspended or resumed (``kind``)."""

    kind: str
    message: str
    at: datetime


class Subscription(_Out):
    """A notification subscription as it is listed and read; its secret is never shown here."""

    id: str
    channel: Channel
    state: SubscriptionState = Field(
        description="`active`; `disabled` (by someone, or after failing too long); `suspended` (its "
        "creator may no longer read where it points; it resumes by itself when they may again); "
        "`expired`. Neither a disabled nor a suspended one is matched or sent."
    )
    namespace: str | None = Field(description="Only jobs in this namespace; null: every namespace.")
    job_name: str | None
    label_selector: str | None
    event_types: list[str]
    rules: list[str]
    severities: list[str]
    url: str | None = Field(
        description="The webhook endpoint. Only its creator sees it whole; everyone else sees its "
        "scheme and host (endpoints of chat systems carry credentials in the URL)."
    )
    recipients: list[str]
    format: str = Field(
        description="What the webhook receives: standard, cloudevents (binary mode) or "
        "cloudevents-structured."
    )
    one_shot: bool
    expires_at: datetime | None
    fired_at: datetime | None
    description: str
    created_by: str
    created_at: datetime
    updated_at: datetime
    failing_since: datetime | None
    disabled_at: datetime | None = Field(description="Since when it is disabled or suspended.")
    disabled_reason: str | None = Field(description="Why it is disabled or suspended.")
    previous_secret_until: datetime | None


class CreatedSubscription(Subscription):
    """A new subscription, with its signing secret: shown in this answer and never again."""

    secret: str | None = Field(description="`whsec_…` signing secret of a webhook; null for email.")


class SubscriptionDetail(Subscription):
    """One subscription with its recent notices, newest first."""

    notices: list[Notice]


class SubscriptionPage(Page[Subscription]):
    """Subscriptions the caller may read, by id."""

    next: str | None = _deprecated_next("after")


class RotatedSecret(_Out):
    """A new signing secret, shown once; the old one keeps signing until ``previous_secret_valid_until``."""

    id: str
    secret: str
    previous_secret_valid_until: datetime


class DeliveryJob(_Out):
    """The job (one run) a delivery is about."""

    namespace: str
    name: str
    uid: str


class DeliveryAttempt(_Out):
    """One attempt to deliver."""

    attempt: int
    at: datetime
    outcome: str
    status_code: int | None
    latency_ms: float
    error: str | None


class Delivery(_Out):
    """One event owed to one subscription, with every attempt made so far."""

    id: str = Field(description="The `webhook-id` (the receiver's idempotency key).")
    cursor: int = Field(description="The delivery's position in the log.")
    subscription_id: str
    channel: Channel
    event_type: str
    job: DeliveryJob
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None = Field(
        description="When a pending delivery is tried next; null once settled or while it waits "
        "behind an earlier delivery of the same job."
    )
    event_at: datetime
    created_at: datetime
    finished_at: datetime | None
    last_status_code: int | None
    last_error: str | None
    last_latency_ms: float | None
    attempt_log: list[DeliveryAttempt]


class DeliveryPage(Page[Delivery]):
    """A subscription's deliveries, newest first."""

    next: int | None = _deprecated_next("before")


# --------------------------------------------------------------------------- audit


class AuditLink(_Out):
    """One link of the audit chain, exactly as exported (re-verifiable: see docs/audit.md)."""

    seq: int
    recorded_at: str = Field(description="RFC 3339 in UTC, microseconds, as hashed.")
    prev_hash: str
    hash: str
    record: dict[str, Any] = Field(description="The audit record exactly as stored and hashed.")
    corroboration: (
        Literal["verified", "contradicted", "unmatched", "unobservable", "unjudged", "disputed", "pending"]
        | None
    ) = Field(
        default=None,
        description="Admission records only (not hashed), whatever their `caller`: `verified` (the watch "
        "stream showed this uid change as claimed, and that change bore out no other record), "
        "`contradicted` (it showed the object change differently), `unmatched` (no such change, or "
        "one a record from the API server's certificate holds, within the window), `disputed` (another "
        "record without the API server's certificate claims the same change: neither is believed), "
        "`unobservable` (the claim is not what the "
        "watch can see, e.g. annotations only), `unjudged` (chained before every record was judged), "
        "`pending` (not judged yet). See docs/audit.md, 'Corroboration'.",
    )
    corroboration_detail: str | None = Field(
        default=None, description="Why the verdict is what it is, in words (admission records only)."
    )


class AuditPage(Page[AuditLink]):
    """Audit records, newest first."""


class BrokenLink(_Out):
    """Where the chain breaks, and why."""

    seq: int
    reason: str


class ChainVerification(_Out):
    """The outcome of walking the whole audit chain."""

    ok: bool
    checked: int = Field(description="Records checked (before the break, if there is one).")
    first_seq: int | None
    last_seq: int | None
    head_hash: str | None
    anchor: str = Field(description="What the first record was checked against: `genesis` or a purge record.")
    broken: BrokenLink | None
