"""Typed messages on the bus: what the watchers observed, normalized.

Every message is a frozen pydantic model with ``schema_version`` and a ``type``
discriminator, so a consumer parses any bus payload with :func:`parse_event` and a
producer can never publish a field nobody declared (``extra="forbid"``). Raw Kubernetes
objects never cross the bus; the watchers normalize them first.

One message does not come from the watchers: :class:`LogSeen`, what the rules' log reader saw in
a running container's stored output, published on the job's subject so the rules read it in
order with the job's other events.

Message ids (``Nats-Msg-Id``) are derived from the object uid and resourceVersion, so the
same observation published twice (a relist, a replay, a restarted watcher) collapses in
JetStream's duplicate window and is written once downstream; a pod version republished with
the log tail it lacked is another observation (:func:`version_of`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from controller.contract import kinds
from controller.contract.kinds import JobKind, replica_label
from controller.contract.message import Message

SCHEMA_VERSION: Literal[1] = 1

PodRole = kinds.PodRole
"""``launcher`` or ``worker`` (:mod:`controller.contract.kinds`): what the rules reason about."""
JobPhase = Literal["Pending", "Running", "Suspended", "Succeeded", "Failed"]
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
Change = Literal["ADDED", "MODIFIED", "DELETED"]

TERMINAL_PHASES: frozenset[str] = frozenset({"Succeeded", "Failed"})


class JobRef(Message):
    """Which run a pod or event belongs to."""

    uid: str
    kind: JobKind
    namespace: str
    name: str


class Condition(Message):
    """One entry of ``status.conditions``."""

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: datetime | None = None


class Resources(Message):
    """Requests and limits of one container, as Kubernetes quantities (``16Gi``, ``8``)."""

    requests: dict[str, str] = Field(default_factory=dict)
    limits: dict[str, str] = Field(default_factory=dict)


class RoleSpec(Message):
    """What one role (launcher or worker) runs."""

    replicas: int | None = None
    image: str | None = None
    command: tuple[str, ...] = ()
    resources: Resources = Field(default_factory=Resources)


class JobSpecSummary(Message):
    """The parts of a job's spec that explain and compare runs."""

    workers: int | None = None
    slots_per_worker: int | None = None
    mpi_implementation: str | None = None
    runtime: str | None = None
    suspend: bool = False
    launcher: RoleSpec | None = None
    worker: RoleSpec | None = None
    replicas: dict[str, int] = Field(
        default_factory=dict,
        description='Replicas per replica type (``{"Master": 1, "Worker": 3}``) of a '
        "training-operator job; empty for the kinds that have only a launcher and workers.",
    )


MAX_MANIFEST_BYTES = 64 * 1024
"""The most bytes of a job's submitted manifest a :class:`JobObserved` carries (and the history keeps)."""
MANIFEST_TRUNCATED = "# [truncated by mpijob-controller: the rest of this spec was not kept]"
"""The last line of a manifest cut to :data:`MAX_MANIFEST_BYTES` begins so."""


def manifest_truncated(manifest: str) -> bool:
    """Whether ``manifest`` was cut to :data:`MAX_MANIFEST_BYTES` (its last line says so)."""
    return manifest.rstrip("\n").rpartition("\n")[2].startswith(MANIFEST_TRUNCATED)


class JobObserved(Message):
    """A training job of any kind (:mod:`controller.contract.kinds`) as last seen by the job watch."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["job"] = "job"
    change: Change
    uid: str
    kind: JobKind
    namespace: str
    name: str
    resource_version: str
    generation: int | None = Field(
        default=None,
        description="``metadata.generation``: the API server raises it for every change of the spec, "
        "never for status or metadata alone (what tells a spec change from a status update).",
    )
    phase: JobPhase
    conditions: tuple[Condition, ...] = ()
    spec: JobSpecSummary = Field(default_factory=JobSpecSummary)
    manifest: str | None = Field(
        default=None,
        max_length=MAX_MANIFEST_BYTES,
        description="The job as submitted, in YAML: metadata a person wrote and the spec, never status "
        "or managedFields; secrets of recognisable shape redacted; cut to MAX_MANIFEST_BYTES with "
        "MANIFEST_TRUNCATED (``watchers/manifests.py``). ``None`` from a watcher older than it.",
    )
    labels: dict[str, str] = Field(default_factory=dict)
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    observed_at: datetime

    @property
    def ref(self) -> JobRef:
        return JobRef(uid=self.uid, kind=self.kind, namespace=self.namespace, name=self.name)


class ContainerState(Message):
    """One container's status, flattened: current state plus the last termination."""

    name: str
    init: bool = False
    ready: bool = False
    restart_count: int = 0
    state: Literal["waiting", "running", "terminated", "unknown"] = "unknown"
    reason: str | None = None
    message: str | None = None
    exit_code: int | None = None
    signal: int | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    last_reason: str | None = None
    last_exit_code: int | None = None
    last_finished_at: datetime | None = None


class PodObserved(Message):
    """A launcher or worker pod of a known job."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["pod"] = "pod"
    change: Change
    job: JobRef
    uid: str
    name: str
    namespace: str
    resource_version: str
    role: PodRole
    replica: str | None = Field(
        default=None,
        description="The replica type as the job's spec names it (``Master``, ``Worker``, ``PS``) "
        "for kinds whose pods say it; None for an MPIJob's or TrainJob's launcher and workers.",
    )
    index: int | None = None
    phase: PodPhase
    reason: str | None = None
    message: str | None = None
    node: str | None = None
    conditions: tuple[Condition, ...] = ()
    containers: tuple[ContainerState, ...] = ()
    resources: Resources = Field(default_factory=Resources)
    log_tail: tuple[str, ...] = ()
    created_at: datetime
    observed_at: datetime

    @property
    def replica_name(self) -> str | None:
        """``Master-0``, ``Worker-3``, ``PS-1``: the replica this pod is, where its kind names them."""
        return replica_label(self.replica, self.index)


NODE_CONDITION_SOURCE = "node-condition"
"""The ``source`` of the :class:`K8sEventObserved` that carry a change of a Node's condition."""


class ObjectRef(Message):
    """``involvedObject`` of a Kubernetes Event."""

    kind: str
    name: str
    uid: str | None = None


class K8sEventObserved(Message):
    """A core/v1 Event about a job or one of its pods, or about a node one of its pods runs on.

    A change of a Node's condition travels as one too (``involved`` the Node, ``reason`` the
    condition's type, ``source`` ``node-condition``), with the condition in ``condition``:
    Kubernetes records those on the Node's status, not as Events."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["event"] = "event"
    change: Change
    job: JobRef
    uid: str
    resource_version: str
    reason: str
    message: str = ""
    event_type: str = "Normal"
    involved: ObjectRef
    count: int = 1
    first_timestamp: datetime | None = None
    last_timestamp: datetime | None = None
    source: str | None = None
    observed_at: datetime
    condition: Condition | None = None


class LogProbed(Message):
    """A bounded probe of a running container's recent log output (``sinceSeconds``), never a stream.

    The watcher probes each running launcher now and then; "no new lines for 30 minutes" is
    what tells a hung MPI job from a quiet healthy one. ``resource_version`` is the probe's
    own sequence (milliseconds since the epoch), so every probe is its own message.
    """

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["log"] = "log"
    change: Change = "MODIFIED"
    job: JobRef
    uid: str
    name: str
    role: PodRole
    replica: str | None = None
    index: int | None = None
    container: str
    resource_version: str
    since_s: float
    new_lines: int
    tail: tuple[str, ...] = ()
    observed_at: datetime


MAX_MARKS_PER_READING = 64
"""Lines in one :class:`LogSeen`: more in one batch of one container are counted, not sent."""
MAX_MARK_CHARS = 4096
MAX_RANKS_PER_READING = 256


class LogMark(Message):
    """One line of a running container's output that matched a failure signature of the rules'
    catalog (:mod:`consumers.rules.live`) — or, with no ``signature``, one of the few lines that
    followed such a line in the same batch (messages that print a block over several lines), or the
    exception a rank raised just before a launcher's account of its end — redacted and bounded like
    every stored line."""

    at: datetime = Field(description="The kubelet's timestamp of the line.")
    rank: int | None = Field(default=None, ge=0, description="The rank its output tag names, if any.")
    signature: str | None = Field(
        default=None, max_length=64, description="``<family>/<name>`` of the signature it matched."
    )
    fatal: bool = Field(
        default=False, description="The wording always ends the process (MPI_ABORT, NCCL's watchdog timeout)."
    )
    line: str = Field(max_length=MAX_MARK_CHARS)


class RankOutput(Message):
    """When one rank of a container (``rank`` None: its untagged output) last printed, as far as read."""

    rank: int | None = Field(default=None, ge=0)
    last_at: datetime
    step: int | None = Field(
        default=None,
        ge=0,
        description="The last progress counter (step, iteration, batch) the rank printed in the batch, in "
        "a format a trainer or logger prints (consumers.rules.progress); None: no such line.",
    )
    step_at: datetime | None = Field(default=None, description="When it printed that counter.")


class LogSeen(Message):
    """What the rules' log reader saw in one stored batch of a running container's output
    (``LOGS``): the lines that matched a failure signature, and when each rank last printed.

    ``resource_version`` is where the batch ends in the container's log (its last line's
    timestamp in nanoseconds and ties, :class:`~controller.contract.logs.LogPosition`), so a
    batch read twice is one message. ``uid`` is the pod's."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["logseen"] = "logseen"
    change: Change = "MODIFIED"
    job: JobRef
    uid: str
    name: str
    role: PodRole
    index: int | None = None
    container: str
    resource_version: str
    marks: tuple[LogMark, ...] = Field(
        default=(), max_length=MAX_MARKS_PER_READING, description="In log order; see :class:`LogMark`."
    )
    ranks: tuple[RankOutput, ...] = Field(default=(), max_length=MAX_RANKS_PER_READING)
    lines: int = Field(default=0, ge=0, description="Lines the batch held.")
    observed_at: datetime


Sample = tuple[datetime, float]
"""One point of a curve: when, and the value then."""

MAX_CURVE_POINTS = 120
MAX_GPUS_PER_POD = 64
MAX_PODS_PER_READING = 256
"""Pods in one :class:`UsageObserved` (about 5 KiB each): a larger run is read in several."""
MAX_NEIGHBOURS = 8
"""Other pods of a pod's node kept in its reading: those using the most (eight of the longest
names add about 0.6 MiB to a reading of :data:`MAX_PODS_PER_READING` pods)."""


def _curve_field(what: str) -> Any:
    return Field(default=(), max_length=MAX_CURVE_POINTS, description=what)


class GpuHealth(Message):
    """What DCGM said of one GPU's health over the span read, as curves in time order: the
        values read at each step, kept where they changed, with the first and the last (a series the
        cluster does not export leaves its curve empty). The counters are cumulative: what happened
        during the span is their increase within it. Kept in the history with the pod's usage (the Metrics
    page shows it); being change points, a curve is short unless the GPU is in trouble."""

    hostname: str | None = Field(default=None, max_length=253, description="DCGM's ``Hostname`` label.")
    pci_bus_id: str | None = Field(
        default=None, max_length=64, description="DCGM's ``pci_bus_id`` label (``00000000:3B:00.0``)."
    )
    xid: tuple[Sample, ...] = _curve_field("``DCGM_FI_DEV_XID_ERRORS``: the last Xid code seen (0: none).")
    ecc_dbe: tuple[Sample, ...] = _curve_field("``DCGM_FI_DEV_ECC_DBE_VOL_TOTAL`` (counter).")
    remapped_rows: tuple[Sample, ...] = _curve_field("``DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS`` (counter).")
    remap_failure: tuple[Sample, ...] = _curve_field("``DCGM_FI_DEV_ROW_REMAP_FAILURE`` (1: failed).")
    nvlink_errors: tuple[Sample, ...] = _curve_field(
        "Sum of ``DCGM_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL`` (counter)."
    )
    throttle_reasons: tuple[Sample, ...] = _curve_field(
        "``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``: the bitmask of reasons the clocks are held down."
    )
    temperature_c: tuple[Sample, ...] = _curve_field("``DCGM_FI_DEV_GPU_TEMP`` (°C).")


class GpuUsage(Message):
    """What one GPU of a pod did over the span read (DCGM exporter's series)."""

    gpu: str = Field(max_length=64, description="DCGM's ``gpu`` label (the index on the node).")
    uuid: str | None = Field(default=None, max_length=128)
    model: str | None = Field(default=None, max_length=128)
    util_mean_pct: float | None = None
    util_p95_pct: float | None = None
    fb_used_max_bytes: float | None = None
    fb_total_bytes: float | None = None
    health: GpuHealth | None = Field(
        default=None, description="DCGM's health series of the GPU; ``None`` when none is exported."
    )


class Neighbour(Message):
    """Another pod on the node of a pod read, and what it used over the span read: kube-state-metrics'
    ``kube_pod_info`` places it and names its owner, cAdvisor and DCGM say what it used."""

    namespace: str = Field(max_length=253)
    pod: str = Field(max_length=253)
    owner_kind: str | None = Field(
        default=None,
        max_length=128,
        description="``kube_pod_info``'s ``created_by_kind`` (``MPIJob``, ``DaemonSet``).",
    )
    owner_name: str | None = Field(
        default=None, max_length=253, description="``kube_pod_info``'s ``created_by_name``."
    )
    since: datetime | None = Field(default=None, description="Its first point within the span read.")
    cpu_mean_cores: float | None = None
    gpus: int = Field(default=0, ge=0, description="GPUs of the node DCGM maps to it.")
    gpu_util_mean_pct: float | None = None


class PodUsage(Message):
    """What one launcher or worker pod used over ``[since, until]``.

    ``gpus`` is ``None`` when no DCGM series names the pod (no GPUs, no DCGM exporter, or its
    pod mapping off); the memory and CPU figures come from cAdvisor and the pod's spec."""

    uid: str
    name: str
    role: PodRole
    index: int | None = None
    since: datetime
    until: datetime
    final: bool = Field(
        default=False, description="The pod has ended and these figures cover its whole life."
    )
    gpus: tuple[GpuUsage, ...] | None = Field(default=None, max_length=MAX_GPUS_PER_POD)
    gpu_util_curve: tuple[Sample, ...] = Field(
        default=(), max_length=MAX_CURVE_POINTS, description="Mean utilization over the pod's GPUs (%)."
    )
    memory_max_bytes: float | None = None
    memory_limit_bytes: float | None = None
    memory_curve: tuple[Sample, ...] = Field(
        default=(), max_length=MAX_CURVE_POINTS, description="Working set of the pod's containers (bytes)."
    )
    cpu_mean_cores: float | None = None
    cpu_max_cores: float | None = None
    cpu_requested_cores: float | None = None
    neighbours: tuple[Neighbour, ...] = Field(
        default=(),
        max_length=MAX_NEIGHBOURS,
        description="Other pods on its node while it runs (not in a final reading), those using the "
        "most first.",
    )


class UsageObserved(Message):
    """What the pods of one run used, read from the cluster's Prometheus (never scraped).

    The watcher reads it every ``usage.refresh_s`` while pods run and once more after each pod
    ends (``final``); ``resource_version`` is the reading's own sequence (milliseconds since the
    epoch, and the part for a run of more than :data:`MAX_PODS_PER_READING` pods), so every
    reading is its own message."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["usage"] = "usage"
    change: Change = "MODIFIED"
    job: JobRef
    uid: str = Field(description="The run's uid: one reading covers the pods of one run.")
    resource_version: str
    pods: tuple[PodUsage, ...] = Field(max_length=MAX_PODS_PER_READING)
    observed_at: datetime


BusEvent = Annotated[
    JobObserved | PodObserved | K8sEventObserved | LogProbed | UsageObserved | LogSeen,
    Field(discriminator="type"),
]

_BUS_EVENT: TypeAdapter[BusEvent] = TypeAdapter(BusEvent)


def parse_event(payload: bytes | str) -> BusEvent:
    """Parse one bus payload; raises ``pydantic.ValidationError`` for anything malformed."""
    return _BUS_EVENT.validate_json(payload)


def version_of(event: BusEvent) -> str:
    """What a message says of its object: ``<resourceVersion>:<change>``, with ``+log`` after the
    version when a pod observation carries a log tail. A tail that could not be read at first
    (the API server answering 503) is read later and the same pod version goes out again with
    it: a message of its own, not a duplicate of the one without the tail."""
    tail = "+log" if isinstance(event, PodObserved) and event.log_tail else ""
    return f"{event.resource_version}{tail}:{event.change}"


def resource_version_in(version: str) -> str:
    """The resourceVersion a :func:`version_of` string names (without its ``+log`` mark)."""
    return version.rpartition(":")[0].removesuffix("+log")


def message_id(event: BusEvent) -> str:
    """The JetStream ``Nats-Msg-Id``: one per observed object version (and log tail, see
    :func:`version_of`)."""
    return f"{event.type}:{event.uid}:{version_of(event)}"


def job_of(event: BusEvent) -> JobRef:
    """The run an event belongs to."""
    return event.ref if isinstance(event, JobObserved) else event.job


class DeadLetter(Message):
    """A message a consumer gave up on, published to ``dlq.<consumer>`` with why."""

    schema_version: Literal[1] = SCHEMA_VERSION
    type: Literal["dead_letter"] = "dead_letter"
    consumer: str
    subject: str
    payload: str
    error: str
    deliveries: int
    stream_sequence: int | None = None
    failed_at: datetime
