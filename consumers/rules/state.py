"""What the rules know about one run, folded from its bus events.

:class:`RunState` holds the latest job object, every pod of the run by uid (deleted pods
stay, marked, so a finished run keeps its final evidence), a bounded set of recent
Kubernetes Events, and the few timestamps the time-based rules need: since when the job
has been in its phase, when a pod last changed, when log output last changed, since when
the launcher has been waiting for workers. Log probes of running containers
(``LogProbed``) only mark that the run has a log feed and when it last printed new lines.

Events may arrive twice or out of order (a watcher relist, JetStream redelivery, two
watch streams). Each object's ``resourceVersion`` is kept and an event older than the
stored one is ignored — except a pod's log tail that arrives after its version (read late by
the watcher and delivered again with the same version): the tail is taken. resourceVersions
are compared as integers when both are numeric (as on every Kubernetes API server today),
otherwise any different version is accepted.
All timestamps recorded here come from ``observed_at`` (the watcher's clock), never from
the machine clock, so replays are deterministic.

What a line seen live is worth as the run goes on is judged in :mod:`consumers.rules.liveverdicts`;
the form a snapshot keeps a state in is :mod:`consumers.rules.stateformat`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from controller.contract.events import (
    TERMINAL_PHASES,
    BusEvent,
    Condition,
    ContainerState,
    JobObserved,
    JobPhase,
    JobRef,
    K8sEventObserved,
    LogMark,
    LogProbed,
    LogSeen,
    PodObserved,
    PodPhase,
    PodRole,
    PodUsage,
    UsageObserved,
    job_of,
)
from controller.contract.kinds import kind_spec, replica_order
from controller.contract.kubeflow import compare

MAX_EVENTS_PER_RUN = 64
"""Recent Kubernetes Events kept per run; the rules only read the latest few per pod."""
MAX_LIVE_LINES = 128
"""Lines seen live (:class:`LogSeen`) kept per pod, the latest."""
MAX_LIVE_CHARS = 16_384
"""Characters of lines seen live kept per pod (a pod printing signature lines all day costs the
engine at most this): recovered lines go first, then the oldest."""
MAX_RANKS_PER_POD = 1024
MAX_PROGRESS_POINTS = 64
"""Progress counters kept per rank: at one reading every 30 s (``live_activity_s``), 32 minutes."""
"""Ranks whose last output is kept per pod."""

LiveStatus = Literal["pending", "confirmed", "recovered"]


@dataclass
class LiveLine:
    """A line seen in a running container's output, and what it is worth so far.

    A signature line starts ``pending``: evidence, at most a warning. It is ``confirmed`` (the
    rules read it as they read a failure-time tail) when its wording is fatal, when its pod ends
    non-zero or the job fails, or when the run prints nothing for ``live_silence_s`` after it; it is
    ``recovered`` (and no longer read) when the run's output goes on ``live_recovery_s`` past it.
    A line without a signature follows the signature line before it and shares its status
    (:mod:`consumers.rules.liveverdicts` judges them)."""

    mark: LogMark
    status: LiveStatus = "pending"


def is_newer(new: str, old: str | None) -> bool:
    """Whether resourceVersion ``new`` supersedes ``old`` (``None``: nothing stored yet)."""
    if old is None:
        return True
    order = compare(new, old)
    return new != old if order is None else order > 0


def _accepts(stored_version: str, stored_deleted: bool, event: BusEvent) -> bool:
    if is_newer(event.resource_version, stored_version):
        return True
    # A DELETED notification may repeat the last version; it still tells us something new.
    return event.change == "DELETED" and not stored_deleted and event.resource_version == stored_version


def _brings_tail(held: PodObserved, pod: PodObserved) -> bool:
    """The version held, again, with the log tail it lacked: the watcher read it late (the API
    server refused the first read), so the rules learn what the failed container said."""
    return pod.resource_version == held.resource_version and bool(pod.log_tail) and not held.log_tail


@dataclass
class PodState:
    """The latest observation of one pod plus what the rules derived from its history."""

    observed: PodObserved
    changed_at: datetime
    deleted: bool = False
    log_tail: tuple[str, ...] = ()
    log_changed_at: datetime | None = None
    log_from_failure: bool = False
    failed_since: datetime | None = None
    live: list[LiveLine] = field(default_factory=list)
    """Lines seen live, in log order (at most :data:`MAX_LIVE_LINES`)."""
    rank_output: dict[int | None, datetime] = field(default_factory=dict)
    """When each rank (None: the untagged output) last printed, as the live reader saw it."""
    progress: dict[int | None, list[tuple[datetime, int]]] = field(default_factory=dict)
    """Each rank's progress counters as the live reader saw them (at most
    :data:`MAX_PROGRESS_POINTS` each, the latest), in time order."""
    live_text: tuple[str, ...] = ()
    """The live lines the rules read as a failure's (confirmed), in log order; set by
    :func:`consumers.rules.liveverdicts.judge_live`."""
    live_pending: tuple[str, ...] = ()
    """The confirmed and the pending live lines, in log order: what a warning is read from."""

    @property
    def uid(self) -> str:
        return self.observed.uid

    @property
    def name(self) -> str:
        return self.observed.name

    @property
    def role(self) -> PodRole:
        return self.observed.role

    @property
    def index(self) -> int | None:
        return self.observed.index

    @property
    def replica(self) -> str | None:
        """The replica type (``Master``, ``Worker``, ``PS``) where the job's kind names it."""
        return self.observed.replica

    @property
    def replica_name(self) -> str | None:
        """``Master-0``, ``Worker-3``: how findings name a replica of a training-operator job."""
        return self.observed.replica_name

    @property
    def phase(self) -> PodPhase:
        return self.observed.phase

    @property
    def node(self) -> str | None:
        return self.observed.node

    @property
    def containers(self) -> tuple[ContainerState, ...]:
        return self.observed.containers

    def condition(self, kind: str) -> Condition | None:
        """The pod condition of type ``kind`` (``Ready``, ``PodScheduled``, …), if reported."""
        return next((c for c in self.observed.conditions if c.type == kind), None)

    @property
    def ready(self) -> bool:
        """Ready as Kubernetes says (condition ``Ready``), else all main containers ready."""
        if self.deleted:
            return False
        ready = self.condition("Ready")
        if ready is not None:
            return ready.status == "True"
        main = [c for c in self.containers if not c.init]
        return self.phase == "Running" and bool(main) and all(c.ready for c in main)

    @property
    def scheduled(self) -> bool:
        """Bound to a node."""
        if self.node:
            return True
        scheduled = self.condition("PodScheduled")
        return scheduled is not None and scheduled.status == "True"

    @property
    def healthy(self) -> bool:
        """Running with every main container running: nothing left to explain."""
        main = [c for c in self.containers if not c.init]
        return self.phase == "Running" and bool(main) and all(c.state == "running" for c in main)

    @property
    def exited_cleanly(self) -> bool:
        """Succeeded, or every main container ended with code 0: whatever it printed, it was
        not a failure."""
        if self.phase == "Succeeded":
            return True
        main = False  # one pass, no list: every rule asks it of every pod on every evaluation
        for c in self.containers:
            if not c.init:
                if c.state != "terminated" or c.exit_code != 0:
                    return False
                main = True
        return main

    @property
    def errored(self) -> bool:
        """Failed, or a container down after a non-zero end."""
        return _errored(self.observed)

    def signature(self) -> tuple[object, ...]:
        """What counts as a transition of this pod (not metadata or heartbeat updates)."""
        return (
            self.phase,
            self.observed.reason,
            self.node,
            self.ready,
            self.deleted,
            tuple((c.name, c.state, c.reason, c.ready, c.restart_count) for c in self.containers),
        )


def _errored(pod: PodObserved) -> bool:
    """Some container is down after a failure (the watcher attaches log tails then)."""
    if pod.phase == "Failed":
        return True
    return any(
        (c.state == "terminated" and c.exit_code not in (None, 0))
        or (c.state == "waiting" and c.last_exit_code not in (None, 0))
        for c in pod.containers
    )


@dataclass
class RunState:
    """Everything known about one run (one job uid)."""

    ref: JobRef
    job: JobObserved | None = None
    phase_since: datetime | None = None
    finished_since: datetime | None = None
    deleted: bool = False
    pods: dict[str, PodState] = field(default_factory=dict)
    events: dict[str, K8sEventObserved] = field(default_factory=dict)
    last_pod_change_at: datetime | None = None
    last_log_at: datetime | None = None
    log_feed: bool = False
    mesh_wait_since: datetime | None = None
    live_output_at: datetime | None = None
    """The latest line of the run's output the live reader saw (any pod, any rank)."""
    usage: dict[str, PodUsage] = field(default_factory=dict)
    """The latest figures of each pod (by uid) read from Prometheus (:class:`UsageObserved`)."""
    _current: list[PodState] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def for_event(cls, event: BusEvent) -> RunState:
        """An empty state for the run ``event`` belongs to."""
        return cls(ref=job_of(event))

    def with_pods(self, pods: dict[str, PodState]) -> RunState:
        """This run with other states of its pods (a view: what the rules would see if…)."""
        return replace(self, pods=pods, _current=None)

    # ----------------------------------------------------------------- reading

    @property
    def phase(self) -> JobPhase | None:
        return self.job.phase if self.job is not None else None

    @property
    def finished(self) -> bool:
        """Terminal phase reached, or the job was deleted: nothing will progress any more."""
        return self.finished_since is not None

    def current_pods(self) -> list[PodState]:
        """The newest pod per (role, replica type, index): a replaced pod no longer speaks for its slot.

        Cached until the next pod event: the rules ask for it many times per evaluation."""
        if self._current is None:
            self._current = self._newest_per_slot()
        return list(self._current)

    def _newest_per_slot(self) -> list[PodState]:
        newest: dict[tuple[str, str, str], PodState] = {}
        for pod in self.pods.values():
            slot = (pod.role, pod.replica or "", str(pod.index) if pod.index is not None else pod.name)
            held = newest.get(slot)
            if held is None or (pod.observed.created_at, pod.observed.observed_at) > (
                held.observed.created_at,
                held.observed.observed_at,
            ):
                newest[slot] = pod
        return sorted(newest.values(), key=pod_order)

    def workers(self) -> list[PodState]:
        return [p for p in self.current_pods() if p.role == "worker"]

    def launcher(self) -> PodState | None:
        return next((p for p in self.current_pods() if p.role == "launcher"), None)

    def expected_workers(self) -> int:
        """Workers the spec asks for, else as many as exist."""
        spec = self.job.spec if self.job is not None else None
        if spec is not None:
            if spec.workers is not None:
                return spec.workers
            if spec.worker is not None and spec.worker.replicas is not None:
                return spec.worker.replicas
        return len(self.workers())

    def events_about(self, pod: PodState) -> list[K8sEventObserved]:
        """Kubernetes Events whose involved object is ``pod``, oldest first."""
        found = [
            e
            for e in self.events.values()
            if e.involved.kind == "Pod"
            and e.involved.name == pod.name
            and (e.involved.uid is None or e.involved.uid == pod.uid)
        ]
        return sorted(found, key=event_time)

    def events_about_node(self, node: str | None) -> list[K8sEventObserved]:
        """Kubernetes Events about the Node ``node`` that reached this run, oldest first.

        Node events (``SystemOOM``, ``OOMKilling`` from the kernel's OOM killer) are about no
        pod; the watcher attaches them to the runs with a pod on that node."""
        if not node:
            return []
        found = [e for e in self.events.values() if e.involved.kind == "Node" and e.involved.name == node]
        return sorted(found, key=event_time)

    def restarting(self) -> Condition | None:
        """The job's ``Restarting`` condition while it holds: the operator is restarting a replica
        under its restartPolicy (training-operator kinds, mpi-operator)."""
        if self.job is None or self.finished:
            return None
        return next((c for c in self.job.conditions if c.type == "Restarting" and c.status == "True"), None)

    def all_workers(self) -> bool:
        """A run without a launcher role: a training-operator job (PyTorchJob, TFJob, …) or a
        TrainJob whose runtime starts every process on the worker (node) pods — torchrun,
        JAX, … — so they form the mesh among themselves."""
        return kind_spec(self.ref.kind).family != "mpi-operator" and self.launcher() is None

    # ----------------------------------------------------------------- folding

    def apply(self, event: BusEvent) -> bool:
        """Fold one event in; returns False when it was stale or a duplicate."""
        if isinstance(event, JobObserved):
            applied = self._apply_job(event)
        elif isinstance(event, PodObserved):
            applied = self._apply_pod(event)
        elif isinstance(event, LogProbed):
            applied = self._apply_log_probe(event)
        elif isinstance(event, UsageObserved):
            return self._apply_usage(event)
        elif isinstance(event, LogSeen):
            return self._apply_log_seen(event)
        else:
            applied = self._apply_k8s_event(event)
        if applied:
            self._update_mesh_wait(event.observed_at)
        return applied

    def _apply_job(self, job: JobObserved) -> bool:
        if self.job is not None and not _accepts(self.job.resource_version, self.deleted, job):
            return False
        if self.job is None:
            self.phase_since = _initial_phase_since(job)
        elif job.phase != self.job.phase:
            self.phase_since = job.observed_at
        self.job = job.model_copy(update={"manifest": None})  # the history keeps it; no rule reads it
        self.ref = job.ref
        self.deleted = self.deleted or job.change == "DELETED"
        if (job.phase in TERMINAL_PHASES or self.deleted) and self.finished_since is None:
            self.finished_since = job.observed_at
        return True

    def _apply_pod(self, pod: PodObserved) -> bool:
        held = self.pods.get(pod.uid)
        if held is not None and not (
            _accepts(held.observed.resource_version, held.deleted, pod) or _brings_tail(held.observed, pod)
        ):
            return False
        at = pod.observed_at
        self._current = None
        if held is None:
            held = PodState(observed=pod, changed_at=at)
            self.pods[pod.uid] = held
            before: tuple[object, ...] | None = None
        else:
            before = held.signature()
            held.observed = pod
        held.deleted = held.deleted or pod.change == "DELETED"
        if before is None or held.signature() != before:
            held.changed_at = at
            self.last_pod_change_at = _latest(self.last_pod_change_at, at)
        held.failed_since = (held.failed_since or at) if pod.phase == "Failed" else None
        self._apply_log(held, pod)
        return True

    def _apply_log(self, held: PodState, pod: PodObserved) -> None:
        at = pod.observed_at
        if pod.log_tail:
            if pod.log_tail != held.log_tail:
                held.log_tail = pod.log_tail
                held.log_changed_at = at
                self.last_log_at = _latest(self.last_log_at, at)
            held.log_from_failure = _errored(pod)
            if not held.log_from_failure:
                self.log_feed = True
        elif held.log_from_failure and held.healthy:
            # The container came back: the failure's log no longer describes the pod.
            held.log_tail = ()
            held.log_from_failure = False

    def _apply_log_probe(self, probe: LogProbed) -> bool:
        """A probe of a running container's recent output: the feed ``hang-progress`` needs.

        Any probe proves the feed exists; only one that found new lines is progress."""
        self.log_feed = True
        if probe.new_lines > 0:
            self.last_log_at = _latest(self.last_log_at, probe.observed_at)
        return True

    def _apply_log_seen(self, seen: LogSeen) -> bool:
        """Lines and rank activity from the live reader, for a pod already known (the follower
        follows pods the watcher has reported, so a pod not known yet is one the rules forgot)."""
        held = self.pods.get(seen.uid)
        if held is None:
            return False
        self.log_feed = True
        for output in seen.ranks:
            if output.rank not in held.rank_output and len(held.rank_output) >= MAX_RANKS_PER_POD:
                oldest = min(held.rank_output, key=lambda r: held.rank_output[r])
                del held.rank_output[oldest]
                held.progress.pop(oldest, None)
            held.rank_output[output.rank] = _latest(held.rank_output.get(output.rank), output.last_at)
            if output.step is not None and output.step_at is not None and output.rank in held.rank_output:
                points = held.progress.setdefault(output.rank, [])
                if not points or output.step_at > points[-1][0]:
                    points.append((output.step_at, output.step))
                    del points[:-MAX_PROGRESS_POINTS]
            self.last_log_at = _latest(self.last_log_at, output.last_at)
            self.live_output_at = _latest(self.live_output_at, output.last_at)
        held_marks = {(line.mark.at, line.mark.line) for line in held.live}
        held.live.extend(LiveLine(m) for m in seen.marks if (m.at, m.line) not in held_marks)
        _trim(held.live)
        return True

    def _apply_usage(self, reading: UsageObserved) -> bool:
        """Keep each pod's newest figures (a reading delivered twice or late changes nothing)."""
        applied = False
        for pod in reading.pods:
            held = self.usage.get(pod.uid)
            if held is None or (pod.until, pod.final) > (held.until, held.final):
                self.usage[pod.uid] = pod
                applied = True
        return applied

    def usage_of(self, pod: PodState) -> PodUsage | None:
        """The latest figures read for ``pod``, if any."""
        return self.usage.get(pod.uid)

    def _apply_k8s_event(self, event: K8sEventObserved) -> bool:
        held = self.events.get(event.uid)
        if held is not None and not _accepts(held.resource_version, False, event):
            return False
        self.events.pop(event.uid, None)
        if event.change != "DELETED":  # an Event expiring (TTL) says nothing about the run
            self.events[event.uid] = event
        while len(self.events) > MAX_EVENTS_PER_RUN:
            del self.events[next(iter(self.events))]
        return True

    def _update_mesh_wait(self, at: datetime) -> None:
        """The mesh waits while its starter runs and not every worker is ready: the launcher,
        or for an all-worker run (:meth:`all_workers`) the first worker that is Running."""
        launcher = self.launcher()
        workers = self.workers()
        if launcher is not None:
            started = not launcher.deleted and launcher.phase == "Running"
        else:
            started = self.all_workers() and any(w.phase == "Running" and not w.deleted for w in workers)
        waiting = (
            started
            and not self.finished
            and sum(1 for w in workers if w.ready) < max(self.expected_workers(), 1)
        )
        if not waiting:
            self.mesh_wait_since = None
        elif self.mesh_wait_since is None:
            self.mesh_wait_since = at


def _trim(lines: list[LiveLine]) -> None:
    """Bound a pod's live lines (:data:`MAX_LIVE_LINES`, :data:`MAX_LIVE_CHARS`)."""
    size = sum(len(line.mark.line) for line in lines)
    if len(lines) <= MAX_LIVE_LINES and size <= MAX_LIVE_CHARS:
        return
    status: LiveStatus | None = None
    kept: list[LiveLine] = []
    for line in lines:  # a recovered signature line goes with the lines that follow it
        status = line.status if line.mark.signature is not None else status
        if status == "recovered":
            size -= len(line.mark.line)
        else:
            kept.append(line)
    while kept and (len(kept) > MAX_LIVE_LINES or size > MAX_LIVE_CHARS):
        size -= len(kept.pop(0).mark.line)
    lines[:] = kept


def pod_order(pod: PodState) -> tuple[int, int, int, str]:
    """Launcher first, then the other replicas (master before workers, then parameter servers)
    by index: the order pods are named in sentences."""
    return (
        0 if pod.role == "launcher" else 1,
        replica_order(pod.replica),
        pod.index if pod.index is not None else -1,
        pod.name,
    )


def event_time(event: K8sEventObserved) -> datetime:
    """When an Event last happened, as its source says, else when the watcher saw it."""
    return event.last_timestamp or event.first_timestamp or event.observed_at


def _latest(held: datetime | None, at: datetime) -> datetime:
    return at if held is None or at > held else held


def _initial_phase_since(job: JobObserved) -> datetime:
    """Best guess, on first sight, of when the job entered its current phase."""
    if job.phase == "Pending":
        return job.created_at
    for condition in job.conditions:
        if condition.type == job.phase and condition.status == "True" and condition.last_transition_time:
            return condition.last_transition_time
    if job.phase == "Running" and job.started_at is not None:
        return job.started_at
    if job.phase == "Suspended":
        return job.created_at
    return job.finished_at or job.observed_at
