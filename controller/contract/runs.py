"""What the API answers about runs, field by field: the models its OpenAPI schema names for the
run routes (``/api/v1/runs…``, ``/api/v1/compare``, a run's logs), shared by the API, which
builds them (``from_attributes``) from the store's rows, and the Python client
(:mod:`controller.client`), which reads them back. Pydantic only: importing them loads no web
framework, database or broker.

The job spec, conditions and evidence are the bus's own models, so a field means the same thing on
the bus, in the database, in the API and in a notebook. Every list is a :class:`Page`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from controller.contract.events import Condition, ContainerState, GpuHealth, JobPhase, JobSpecSummary
from controller.contract.findings import Evidence, FindingStatus, Severity
from controller.contract.kubeflow import JobKind

__all__ = [
    "ComparedRun",
    "Comparison",
    "Durations",
    "FailureCause",
    "Finding",
    "FindingList",
    "GpuUsage",
    "LogEntry",
    "LogPage",
    "Page",
    "Pod",
    "PodIdentity",
    "PodSummary",
    "PodUsage",
    "RunDetail",
    "RunPage",
    "RunSummary",
    "SpecField",
    "Termination",
    "UsageLine",
]

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list; follow ``next_cursor`` for the next."""

    model_config = ConfigDict(frozen=True)

    items: list[T]
    next_cursor: str | None = Field(
        description="Pass as `cursor` to get the next page; null on the last page."
    )


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True, frozen=True)


class Durations(_Out):
    """Where a run's time went, in seconds; null where the run has not got that far."""

    queued_s: float | None = Field(description="Created → started (scheduler, quota, suspension).")
    to_all_workers_running_s: float | None = Field(
        default=None, description="Created → the last worker pod seen Running (only in comparisons)."
    )
    running_s: float | None = Field(description="Started → finished.")
    total_s: float | None = Field(description="Created → finished.")


class RunSummary(_Out):
    """One run (one training job object of any kind, by uid) as lists show it."""

    uid: str
    kind: JobKind
    namespace: str
    name: str
    attempt: int = Field(description="n-th run of this job name in its namespace, by creation time.")
    previous_uid: str | None = Field(description="The attempt before this one.")
    phase: JobPhase
    labels: dict[str, str]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    deleted_at: datetime | None


class RunPage(Page[RunSummary]):
    """One page of runs, newest first."""


class PodIdentity(_Out):
    """Which pod of a run: its uid, name, role and replica (the fields every pod model starts with)."""

    uid: str
    name: str
    role: str
    replica: str | None = Field(
        default=None, description="Replica type of a training-operator job's pod (Master, Worker, PS, …)."
    )
    index: int | None


class Pod(PodIdentity):
    """Latest known state of a launcher or worker pod."""

    phase: str
    node: str | None
    reason: str | None
    restart_count: int
    containers: list[ContainerState]


class Finding(_Out):
    """What the rules concluded about a run: one per rule, firing or resolved."""

    id: str
    rule: str
    severity: Severity
    status: FindingStatus
    root_cause: str
    evidence: list[Evidence]
    remediation: list[str]
    doc_anchor: str
    revision: int
    superseded_by: str | None
    first_seen: datetime
    last_seen: datetime
    resolved_at: datetime | None


class GpuUsage(_Out):
    """One GPU of a pod (DCGM exporter's series)."""

    gpu: str
    uuid: str | None = None
    model: str | None = None
    util_mean_pct: float | None
    util_p95_pct: float | None
    fb_used_max_bytes: float | None = Field(description="Highest framebuffer used.")
    fb_total_bytes: float | None = Field(description="Framebuffer of the GPU (used + free).")
    health: GpuHealth | None = Field(
        default=None,
        description="DCGM's health series of the GPU over the span read (Xid, ECC, throttle reasons, "
        "temperature); null when none is exported or the reading predates their keeping.",
    )


class PodUsage(_Out):
    """What one launcher or worker used, read from the cluster's Prometheus (kept after the pod is
    deleted). Null figures: not read (no Prometheus configured, no series for the pod)."""

    pod_uid: str
    name: str
    role: str
    index: int | None
    since: datetime
    until: datetime
    final: bool = Field(description="The pod ended and the figures cover its whole life.")
    gpus: list[GpuUsage] | None = Field(description="Null: no DCGM series for the pod.")
    gpu_util_curve: list[tuple[datetime, float]] = Field(description="Mean over its GPUs (%), last reading.")
    memory_max_bytes: float | None = Field(description="Highest working set of its containers.")
    memory_limit_bytes: float | None
    memory_curve: list[tuple[datetime, float]] = Field(description="Working set (bytes), last reading.")
    cpu_mean_cores: float | None
    cpu_max_cores: float | None
    cpu_requested_cores: float | None
    memory_peak: str | None = Field(default=None, description="In words: `15.8 GiB of 16.0 GiB`.")


class RunDetail(RunSummary):
    """One run with its spec, conditions, pods, findings and what its pods used."""

    spec: JobSpecSummary
    manifest: str | None = Field(
        default=None,
        description="The job as submitted, in YAML (metadata a person wrote and the spec; secrets of "
        "recognisable shape redacted; at most 64 KiB, a cut one ends with a `truncated` comment); "
        "null for runs stored before it was kept.",
    )
    conditions: list[Condition]
    pods: list[Pod]
    findings: list[Finding]
    usage: list[PodUsage] = Field(default_factory=list)


class FindingList(_Out):
    """A run's findings, firing first."""

    items: list[Finding]


class Termination(_Out):
    """One container termination."""

    container: str
    reason: str | None
    exit_code: int | None
    signal: int | None
    at: datetime | None


class PodSummary(_Out):
    """A launcher or worker of a compared run."""

    role: str
    replica: str | None = Field(
        default=None, description="Replica type of a training-operator job's pod (Master, Worker, PS, …)."
    )
    index: int | None
    name: str
    phase: str
    node: str | None
    restarts: int
    running_at: datetime | None = Field(description="When the pod was first seen Running.")
    terminations: list[Termination]


class FailureCause(_Out):
    """A firing finding: why the run failed or is stuck."""

    rule: str
    severity: Severity
    root_cause: str
    doc_anchor: str


class ComparedRun(_Out):
    """One column of a comparison."""

    run: RunSummary
    outcome: JobPhase
    durations: Durations
    failure_causes: list[FailureCause]
    pods: list[PodSummary]


class SpecField(_Out):
    """One spec field across the compared runs, in the order of `runs` (null: not recorded)."""

    path: str = Field(description="Dotted path, e.g. `worker.resources.limits.memory`.")
    values: list[Any]
    differs: bool


class UsageLine(_Out):
    """One launcher or worker slot across the compared runs, in the order of `runs`."""

    slot: str = Field(description="`launcher`, `worker-2`, …")
    memory_peaks: list[str | None] = Field(description="`15.8 GiB of 16.0 GiB`; null: not read.")
    gpu_util_mean_pct: list[float | None]
    sentence: str = Field(
        description="`worker-2: attempt 1 peaked at 15.8 GiB of 16.0 GiB; attempt 2 at 17.1 GiB of 32.0 GiB`"
    )


class Comparison(_Out):
    """2 to 5 runs side by side."""

    runs: list[ComparedRun]
    spec: list[SpecField] = Field(description="Every recorded spec field; `differs` marks the differences.")
    differences: list[str] = Field(description="Paths of the spec fields that differ.")
    usage: list[UsageLine] = Field(
        default_factory=list, description="Slot by slot, what each run's pod used (empty: nothing read)."
    )


class LogEntry(BaseModel):
    """One line of a run's log."""

    model_config = ConfigDict(frozen=True)

    at: str
    """When the kubelet saw it (RFC 3339, nanoseconds)."""
    pod: str
    container: str
    role: str | None
    index: int | None
    rank: int | None
    text: str
    note: bool = False
    """A line of the controller's own (the run's byte cap reached), not of the container."""


class LogPage(Page[LogEntry]):
    """One page of a run's lines, in time order (a partial one: among the batches it scanned)."""

    partial: bool = Field(
        default=False,
        description="The read ran out of its budget of work (MPIJC_API__LOG_SEARCH_BUDGET_S) before "
        "the end, or follows a cursor of one that did: the items are the lines found in the batches "
        "it scanned, in time order among them; `next_cursor` goes on with the rest, none lost or "
        "given twice, but later pages are not merged by time with this one.",
    )
    scanned_until: str | None = Field(
        default=None,
        description="With `partial`: when the last batch this page scanned was stored (RFC 3339).",
    )
