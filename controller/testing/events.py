"""Builders of typed bus events (``controller.contract.events``) for rule tests.

Defaults describe one realistic run: MPIJob ``team-a/pi`` created at :data:`T0`, 4 workers
with 8 GPUs and a 16Gi memory limit each, 8 slots per worker, Open MPI; pods
``pi-launcher`` and ``pi-worker-<i>`` on nodes ``gpu-node-<i>``. Every builder takes
keyword overrides, and every event gets a fresh, increasing resourceVersion unless told.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from consumers.rules import RuleEngine
from controller.contract.events import (
    BusEvent,
    Change,
    Condition,
    ContainerState,
    GpuUsage,
    JobObserved,
    JobPhase,
    JobRef,
    JobSpecSummary,
    K8sEventObserved,
    LogProbed,
    LogSeen,
    ObjectRef,
    PodObserved,
    PodPhase,
    PodRole,
    PodUsage,
    Resources,
    RoleSpec,
    UsageObserved,
)
from controller.contract.findings import Finding
from controller.contract.logs import LogBatch, LogLine, LogPosition, rank_of

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
JOB_UID = "0b7c5d1e-4f2a-4c1b-9d3e-000000000001"
REF = JobRef(uid=JOB_UID, kind="MPIJob", namespace="team-a", name="pi")
IMAGE = "registry.example.com/team-a/pi:v2"
WORKER_LIMITS = {"memory": "16Gi", "cpu": "32", "nvidia.com/gpu": "8"}
LAUNCHER_LIMITS = {"memory": "2Gi", "cpu": "1"}

_rv = itertools.count(100)


def rv() -> str:
    """A strictly increasing resourceVersion."""
    return str(next(_rv))


def at(minutes: float = 0, seconds: float = 0) -> datetime:
    """``T0`` plus an offset."""
    return T0 + timedelta(minutes=minutes, seconds=seconds)


def ref(namespace: str = "team-a", name: str = "pi", uid: str = JOB_UID) -> JobRef:
    return JobRef(uid=uid, kind="MPIJob", namespace=namespace, name=name)


def spec(workers: int = 4, gpus: int = 8, memory: str = "16Gi", *, suspend: bool = False) -> JobSpecSummary:
    limits = {**WORKER_LIMITS, "memory": memory, "nvidia.com/gpu": str(gpus)}
    return JobSpecSummary(
        workers=workers,
        slots_per_worker=8,
        mpi_implementation="OpenMPI",
        suspend=suspend,
        launcher=RoleSpec(replicas=1, image=IMAGE, resources=Resources(limits=LAUNCHER_LIMITS)),
        worker=RoleSpec(replicas=workers, image=IMAGE, resources=Resources(limits=limits, requests=limits)),
    )


def job(
    phase: JobPhase = "Running",
    *,
    observed_at: datetime = T0,
    job: JobRef = REF,
    change: Change = "MODIFIED",
    labels: dict[str, str] | None = None,
    conditions: Sequence[Condition] = (),
    job_spec: JobSpecSummary | None = None,
    created_at: datetime = T0,
    resource_version: str | None = None,
    generation: int | None = 1,
) -> JobObserved:
    """The job object as last seen."""
    return JobObserved(
        change=change,
        uid=job.uid,
        kind=job.kind,
        namespace=job.namespace,
        name=job.name,
        resource_version=resource_version or rv(),
        generation=generation,
        phase=phase,
        conditions=tuple(conditions),
        spec=job_spec or spec(suspend=phase == "Suspended"),
        labels=labels or {"training.kubeflow.org/job-name": job.name},
        created_at=created_at,
        started_at=created_at if phase in ("Running", "Succeeded") else None,  # a success has run
        observed_at=observed_at,
    )


# ---------------------------------------------------------------- containers


def _container(state: str, name: str, restarts: int, **fields: object) -> ContainerState:
    return ContainerState(name=name, restart_count=restarts, state=state, **fields)


def running(name: str = "worker", *, ready: bool = True, restarts: int = 0, **last: object) -> ContainerState:
    """A running container; ``last_reason=…, last_exit_code=…`` describe its previous run."""
    return _container("running", name, restarts, ready=ready, started_at=T0, **last)


def waiting(
    reason: str, message: str | None = None, *, name: str = "worker", restarts: int = 0, **last: object
) -> ContainerState:
    """A waiting container (``ContainerCreating``, ``ImagePullBackOff``, ``CrashLoopBackOff``, …)."""
    return _container("waiting", name, restarts, reason=reason, message=message, **last)


def terminated(
    reason: str, exit_code: int, *, name: str = "worker", message: str | None = None, restarts: int = 0
) -> ContainerState:
    """A terminated container."""
    return _container(
        "terminated", name, restarts, reason=reason, exit_code=exit_code, message=message, finished_at=T0
    )


# ---------------------------------------------------------------------- pods


def pod(
    role: PodRole = "worker",
    index: int | None = 0,
    *,
    observed_at: datetime = T0,
    phase: PodPhase = "Running",
    ready: bool = True,
    containers: Sequence[ContainerState] | None = None,
    reason: str | None = None,
    message: str | None = None,
    node: str | None = "",
    conditions: Sequence[Condition] | None = None,
    log_tail: Sequence[str] = (),
    change: Change = "MODIFIED",
    uid: str | None = None,
    name: str | None = None,
    job: JobRef = REF,
    created_at: datetime = T0,
    limits: dict[str, str] | None = None,
    resource_version: str | None = None,
    replica: str | None = None,
) -> PodObserved:
    """A launcher or worker pod (a training-operator ``replica``, if given); by default running,
    ready and bound to a GPU node."""
    launcher = role == "launcher"
    slot = replica.lower() if replica else "launcher" if launcher else "worker"
    name = name or (f"{job.name}-{slot}" if launcher else f"{job.name}-{slot}-{index}")
    if node == "":
        node = "cpu-node-0" if launcher else f"gpu-node-{index}"
    if containers is None:
        containers = (running("launcher" if launcher else "worker", ready=ready),)
    if conditions is None:
        conditions = (
            Condition(type="PodScheduled", status="True" if node else "False"),
            Condition(type="Ready", status="True" if ready and phase == "Running" else "False"),
        )
    return PodObserved(
        change=change,
        job=job,
        uid=uid or f"uid-{name}",
        name=name,
        namespace=job.namespace,
        resource_version=resource_version or rv(),
        role=role,
        replica=replica,
        index=None if launcher and replica is None else index,
        phase=phase,
        reason=reason,
        message=message,
        node=node,
        conditions=tuple(conditions),
        containers=tuple(containers),
        resources=Resources(
            limits=limits if limits is not None else LAUNCHER_LIMITS if launcher else WORKER_LIMITS
        ),
        log_tail=tuple(log_tail),
        created_at=created_at,
        observed_at=observed_at,
    )


TORCH = JobRef(uid="7e1c0f4a-2b3d-4c5e-8f60-0000000000pt", kind="PyTorchJob", namespace="team-a", name="bert")
"""A PyTorchJob: a Master and Workers, each running its own ranks under torchrun; no launcher."""


def replica(kind: str, index: int, **overrides: Any) -> PodObserved:
    """A pod of a training-operator job's replica (``Master``, ``Worker``, ``PS``), of :data:`TORCH`
    unless ``job`` says otherwise; by default running and ready."""
    overrides.setdefault("job", TORCH)
    return pod("worker", index, replica=kind, **overrides)


def torch_run(observed_at: datetime = T0, workers: int = 2) -> list[BusEvent]:
    """A healthy Running PyTorchJob: Master-0 and ``workers`` Workers, running and ready."""
    spec = JobSpecSummary(workers=workers + 1, replicas={"Master": 1, "Worker": workers})
    return [
        job("Running", observed_at=observed_at, job=TORCH, job_spec=spec),
        replica("Master", 0, observed_at=observed_at),
        *(replica("Worker", i, observed_at=observed_at) for i in range(workers)),
    ]


def worker(index: int, **overrides: Any) -> PodObserved:
    return pod("worker", index, **overrides)


def launcher(**overrides: Any) -> PodObserved:
    return pod("launcher", None, **overrides)


def failed_launcher(log: str, *, observed_at: datetime = T0, exit_code: int = 1) -> PodObserved:
    """The launcher after mpirun exited with an error, carrying its log tail."""
    return launcher(
        observed_at=observed_at,
        phase="Failed",
        ready=False,
        containers=(terminated("Error", exit_code, name="launcher"),),
        log_tail=log.strip("\n").splitlines(),
    )


def pending_worker(index: int, message: str, **overrides: Any) -> PodObserved:
    """A worker the scheduler could not place."""
    return worker(
        index,
        phase="Pending",
        ready=False,
        node=None,
        containers=(),
        conditions=(Condition(type="PodScheduled", status="False", reason="Unschedulable", message=message),),
        **overrides,
    )


# -------------------------------------------------------------------- events


def k8s_event(
    reason: str,
    message: str = "",
    *,
    involved: str = "pi-worker-0",
    kind: str = "Pod",
    event_type: str = "Warning",
    observed_at: datetime = T0,
    uid: str | None = None,
    count: int = 1,
    job: JobRef = REF,
) -> K8sEventObserved:
    """A core/v1 Event about a pod (or the job) of the run."""
    return K8sEventObserved(
        change="ADDED",
        job=job,
        uid=uid or f"event-{reason}-{involved}-{next(_rv)}",
        resource_version=rv(),
        reason=reason,
        message=message,
        event_type=event_type,
        involved=ObjectRef(kind=kind, name=involved),
        count=count,
        first_timestamp=observed_at,
        last_timestamp=observed_at,
        observed_at=observed_at,
    )


def log_probe(new_lines: int, *, observed_at: datetime = T0, since_s: float = 300.0) -> LogProbed:
    """The watcher's probe of the launcher's recent output: ``new_lines`` in ``since_s``."""
    return LogProbed(
        job=REF,
        uid="uid-pi-launcher",
        name="pi-launcher",
        role="launcher",
        container="launcher",
        resource_version=str(int(observed_at.timestamp() * 1000)),
        since_s=since_s,
        new_lines=new_lines,
        tail=(f"step {new_lines}",) if new_lines else (),
        observed_at=observed_at,
    )


def log_batch(
    *lines: str,
    observed_at: datetime = T0,
    step_s: float = 0.0,
    pod: PodObserved | None = None,
    container: str | None = None,
) -> LogBatch:
    """A batch of ``lines`` as a follower stores it for ``pod`` (the default run's launcher): the
    first printed at ``observed_at``, each next ``step_s`` later, ranks read from their tags."""
    held = pod or launcher()
    start = int(observed_at.timestamp() * 1e9)
    stamped = [
        LogLine(ts=start + int(i * step_s * 1e9), rank=rank_of(text.encode()), text=text)
        for i, text in enumerate(lines)
    ]
    return LogBatch(
        run_uid=held.job.uid,
        kind=held.job.kind,
        namespace=held.namespace,
        job=held.job.name,
        pod=held.name,
        pod_uid=held.uid,
        container=container or held.containers[0].name,
        role=held.role,
        index=held.index,
        lines=tuple(stamped),
        position=LogPosition(ts=stamped[-1].ts, ties=next(_rv)),
    )


def log_seen(
    *lines: str, observed_at: datetime = T0, step_s: float = 0.0, pod: PodObserved | None = None
) -> LogSeen:
    """What the rules' log reader publishes for :func:`log_batch` of the same arguments, read
    when its last line was printed."""
    from consumers.rules.logreader import told  # the reader's own scan, not a copy of it

    batch = log_batch(*lines, observed_at=observed_at, step_s=step_s, pod=pod)
    seen = told(batch, observed_at + timedelta(seconds=step_s * (len(lines) - 1)))
    assert seen is not None, "a batch of lines always tells the rules something the first time"
    return seen


def pod_usage(
    index: int | None,
    *,
    util: Sequence[float] = (),
    memory_gib: Sequence[float] = (),
    end: datetime = T0,
    step_s: float = 60.0,
    limit_gib: float = 16.0,
    final: bool = False,
) -> PodUsage:
    """What one pod of the default run used: a point of ``util`` (mean over its GPUs, %) and of
    ``memory_gib`` every ``step_s`` up to ``end``; no GPU figures when ``util`` is empty."""
    name = "pi-launcher" if index is None else f"pi-worker-{index}"
    points = max(len(util), len(memory_gib), 1)
    times = [end - timedelta(seconds=step_s * (points - 1 - i)) for i in range(points)]
    gpus = (GpuUsage(gpu="0", util_mean_pct=sum(util) / len(util), util_p95_pct=max(util)),) if util else None
    return PodUsage(
        uid=f"uid-{name}",
        name=name,
        role="launcher" if index is None else "worker",
        index=index,
        since=times[0],
        until=end,
        final=final,
        gpus=gpus,
        gpu_util_curve=tuple(zip(times[-len(util) :], util, strict=True)) if util else (),
        memory_max_bytes=max(memory_gib) * 2**30 if memory_gib else None,
        memory_limit_bytes=limit_gib * 2**30,
        memory_curve=tuple((t, v * 2**30) for t, v in zip(times[-len(memory_gib) :], memory_gib, strict=True))
        if memory_gib
        else (),
    )


def usage(*pods: PodUsage, observed_at: datetime = T0, job: JobRef = REF) -> UsageObserved:
    """One reading of the run's usage (as the watcher publishes it)."""
    return UsageObserved(
        job=job,
        uid=job.uid,
        resource_version=str(int(observed_at.timestamp() * 1000)),
        pods=pods,
        observed_at=observed_at,
    )


def running_run(observed_at: datetime = T0, workers: int = 4) -> list[BusEvent]:
    """A healthy Running run: the job, its launcher and every worker running and ready."""
    return [
        job("Running", observed_at=observed_at),
        launcher(observed_at=observed_at),
        *(worker(i, observed_at=observed_at) for i in range(workers)),
    ]


def replay(engine: RuleEngine, events: Sequence[BusEvent], *ticks: datetime) -> list[Finding]:
    """Observe ``events`` each at its own ``observed_at``, then tick at ``ticks``; all changes."""
    changes: list[Finding] = []
    for event in events:
        changes.extend(engine.observe(event, event.observed_at))
    for now in ticks:
        changes.extend(engine.tick(now))
    return changes
