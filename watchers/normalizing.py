"""Raw Kubernetes objects → typed bus events.

The only place that knows the shapes of the job kinds of :mod:`controller.contract.kinds` —
MPIJob ``kubeflow.org/v2beta1``, the training-operator ``kubeflow.org/v1`` kinds (PyTorchJob,
TFJob, XGBoostJob, PaddleJob, JAXJob), TrainJob ``trainer.kubeflow.org/v1alpha1`` — of their
pods (by the registry's labels) and of core/v1 Events. Everything after this speaks
:mod:`controller.contract.events`.

A malformed object raises :class:`MalformedObject` with a message naming what is missing;
an object that is not ours (a pod of some other workload, an event about a Deployment)
makes the functions return ``None``. Neither ever crashes the watcher.

Free text that a workload controls (log tails, termination and status messages, reasons) is
scrubbed here, at the watcher boundary, before anything is published: control characters
(NUL above all, which PostgreSQL cannot store) go and well-known secret shapes become
``[REDACTED]`` (:mod:`controller.contract.redaction`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict, cast

from pydantic import ValidationError

from controller.contract.events import (
    Change,
    Condition,
    JobObserved,
    JobPhase,
    JobRef,
    JobSpecSummary,
    K8sEventObserved,
    ObjectRef,
    PodObserved,
    Resources,
    RoleSpec,
)
from controller.contract.kinds import JobKind, KindSpec, PodOwner, kind_named, kind_spec, owner_from_labels
from controller.contract.redaction import scrub, scrub_lines
from watchers.manifests import manifest


class ObjectMeta(TypedDict, total=False):
    name: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]


class MalformedObject(ValueError):
    """A watched object lacks what every Kubernetes object has, or has the wrong types."""


def _meta(obj: Mapping[str, Any]) -> ObjectMeta:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise MalformedObject("object has no metadata")
    for key in ("name", "uid", "resourceVersion"):
        if not isinstance(meta.get(key), str) or not meta[key]:
            raise MalformedObject(f"object has no metadata.{key}")
    return cast(ObjectMeta, meta)


def _text(value: Any) -> Any:
    """Free text from the cluster, scrubbed (controls, secrets); anything else as is (pydantic judges)."""
    if not isinstance(value, str):
        return value
    return _scrub_short(value) if len(value) <= _SHORT else scrub(value)


_SHORT = 256


@functools.lru_cache(maxsize=4096)
def _scrub_short(text: str) -> str | None:
    """:func:`scrub` of a short text, kept: the reasons and messages of pods and conditions
    (``ContainerCreating``, ``OOMKilled``, ``containers with unready status: [worker]``) repeat
    across every pod and version, and a scrub costs 1.5 µs where a look-up costs 0.1."""
    return scrub(text)


def parse_time(value: Any) -> datetime | None:
    """RFC 3339 timestamp (``2026-11-20T10:00:05Z``, MicroTime too) → aware datetime."""
    if not value:
        return None
    if not isinstance(value, str):
        raise MalformedObject(f"not a timestamp: {value!r}")
    return _parsed_time(value)


@functools.lru_cache(maxsize=4096)
def _parsed_time(value: str) -> datetime:
    """:func:`parse_time` of a string, kept (a datetime is immutable): a pod's creation and
    start times, its conditions' and its containers', come again with every version of it.
    What does not parse raises each time (nothing is kept)."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise MalformedObject(f"not a timestamp: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _conditions(status: Mapping[str, Any]) -> tuple[Condition, ...]:
    return tuple(Condition(**fields) for fields in _condition_fields(status))


def _true(conditions: tuple[Condition, ...], kind: str) -> Condition | None:
    return next((c for c in conditions if c.type == kind and c.status == "True"), None)


def job_phase(kind: JobKind | KindSpec, spec: Mapping[str, Any], status: Mapping[str, Any]) -> JobPhase:
    """Phase from the conditions of any kind: terminal wins, then suspension, then running.

    The operators' conditions (mpi-operator and training-operator alike: Created, Running,
    Restarting, Succeeded, Failed, Suspended) say it directly; ``Restarting`` (a replica being
    restarted under its restartPolicy) is a running job's state. A TrainJob's JobSet says
    Complete/Failed, and running when any of its Jobs has active or ready pods."""
    family = (kind if isinstance(kind, KindSpec) else kind_spec(kind)).family
    conditions = _conditions(status)
    if _true(conditions, "Failed"):
        return "Failed"
    if _true(conditions, "Succeeded") or _true(conditions, "Complete"):
        return "Succeeded"
    suspended = (spec.get("runPolicy") or {}).get("suspend") if family != "trainer" else spec.get("suspend")
    if _true(conditions, "Suspended") or suspended:
        return "Suspended"
    if family != "trainer":
        return "Running" if _true(conditions, "Running") or _true(conditions, "Restarting") else "Pending"
    jobs_status = status.get("jobsStatus") or ()
    if any(
        (js.get("active") or 0) + (js.get("ready") or 0) > 0 for js in jobs_status if isinstance(js, dict)
    ):
        return "Running"
    return "Pending"


def _resources(container: Mapping[str, Any] | None) -> Resources:
    return Resources(**_resource_fields(container))


def _main_container(pod_spec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    containers = pod_spec.get("containers") or []
    return containers[0] if containers and isinstance(containers[0], dict) else None


def _role_spec(replica: Mapping[str, Any] | None) -> RoleSpec | None:
    if not replica:
        return None
    container = _main_container(((replica.get("template") or {}).get("spec")) or {})
    return RoleSpec(
        replicas=replica.get("replicas"),
        image=(container or {}).get("image"),
        command=tuple(
            str(c) for c in [*(container or {}).get("command", []), *(container or {}).get("args", [])]
        ),
        resources=_resources(container),
    )


def _mpijob_spec(spec: Mapping[str, Any]) -> JobSpecSummary:
    replicas = spec.get("mpiReplicaSpecs") or {}
    worker = _role_spec(replicas.get("Worker"))
    return JobSpecSummary(
        workers=worker.replicas if worker else 0,
        slots_per_worker=spec.get("slotsPerWorker"),
        mpi_implementation=spec.get("mpiImplementation", "OpenMPI"),
        suspend=bool((spec.get("runPolicy") or {}).get("suspend")),
        launcher=_role_spec(replicas.get("Launcher")),
        worker=worker,
    )


def _replica_spec(spec: Mapping[str, Any], field: str) -> JobSpecSummary:
    """A training-operator job: every replica type but a launcher counts as a worker (rank-bearing
    process); the Worker replica's template (else the master's) describes what workers run."""
    replicas = spec.get(field) or {}
    if not isinstance(replicas, dict):
        raise MalformedObject(f"spec.{field} is not a map of replica specs")
    roles = {str(name): _role_spec(r) for name, r in replicas.items() if isinstance(r, dict)}
    counts = {name: int(r.replicas if r and r.replicas is not None else 1) for name, r in roles.items()}
    worker = next((roles[n] for n in ("Worker", "Master", "Chief") if roles.get(n)), None)
    return JobSpecSummary(
        workers=sum(n for name, n in counts.items() if name != "Launcher"),
        suspend=bool((spec.get("runPolicy") or {}).get("suspend")),
        launcher=roles.get("Launcher"),
        worker=worker,
        replicas=counts,
    )


def _trainjob_spec(spec: Mapping[str, Any]) -> JobSpecSummary:
    trainer = spec.get("trainer") or {}
    per_node = trainer.get("resourcesPerNode") or {}
    node = RoleSpec(
        replicas=trainer.get("numNodes"),
        image=trainer.get("image"),
        command=tuple(str(c) for c in [*trainer.get("command", []), *trainer.get("args", [])]),
        resources=Resources(
            requests={k: str(v) for k, v in (per_node.get("requests") or {}).items()},
            limits={k: str(v) for k, v in (per_node.get("limits") or {}).items()},
        ),
    )
    procs = trainer.get("numProcPerNode")
    return JobSpecSummary(
        workers=trainer.get("numNodes"),
        slots_per_worker=int(procs) if isinstance(procs, int | str) and str(procs).isdigit() else None,
        runtime=(spec.get("runtimeRef") or {}).get("name"),
        suspend=bool(spec.get("suspend")),
        worker=node,
    )


def _job_times(status: Mapping[str, Any], conditions: tuple[Condition, ...]) -> tuple[datetime | None, ...]:
    running = _true(conditions, "Running")
    terminal = _true(conditions, "Succeeded") or _true(conditions, "Complete") or _true(conditions, "Failed")
    started = parse_time(status.get("startTime")) or (running.last_transition_time if running else None)
    finished = parse_time(status.get("completionTime")) or (
        terminal.last_transition_time if terminal else None
    )
    return started, finished


def _spec_summary(kind: KindSpec, spec: Mapping[str, Any]) -> JobSpecSummary:
    if kind.family == "mpi-operator":
        return _mpijob_spec(spec)
    if kind.family == "trainer" or kind.replica_specs is None:
        return _trainjob_spec(spec)
    return _replica_spec(spec, kind.replica_specs)


def _job_kind(obj: Mapping[str, Any]) -> KindSpec:
    kind = kind_named(obj.get("kind"))
    if kind is None:
        raise MalformedObject(f"unknown job kind {obj.get('kind')!r}")
    return kind


def job_ref(obj: Mapping[str, Any]) -> JobRef:
    """Which run the job ``obj`` is, and nothing else of it: what the correlator needs of a job
    already published at its version (a restart's list of every job), without writing its
    manifest or building the observation that would not be published."""
    meta = _meta(obj)
    return JobRef(
        uid=meta["uid"],
        kind=_job_kind(obj).kind,
        namespace=meta.get("namespace", "default"),
        name=meta["name"],
    )


def normalize_job(obj: Mapping[str, Any], change: Change, observed_at: datetime) -> JobObserved:
    """A job of any kind of :data:`~controller.contract.kinds.KINDS` as a :class:`JobObserved`."""
    meta = _meta(obj)
    kind = _job_kind(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = _conditions(status)
    started, finished = _job_times(status, conditions)
    try:
        return JobObserved(
            change=change,
            uid=meta["uid"],
            kind=kind.kind,
            namespace=meta.get("namespace", "default"),
            name=meta["name"],
            resource_version=meta["resourceVersion"],
            generation=meta.get("generation"),
            phase=job_phase(kind, spec, status),
            conditions=conditions,
            spec=_spec_summary(kind, spec),
            manifest=manifest(obj),
            labels=meta.get("labels") or {},
            created_at=parse_time(meta.get("creationTimestamp")) or observed_at,
            started_at=started,
            finished_at=finished,
            observed_at=observed_at,
        )
    except (ValidationError, AttributeError, TypeError) as exc:
        raise MalformedObject(f"{kind.kind} {meta['name']}: {exc}") from exc


def pod_owner(obj: Mapping[str, Any]) -> PodOwner | None:
    """The job a pod belongs to and which replica it is, from its labels (and, where a label
    does not tell the kind, its ownerReferences); ``None`` for any other pod."""
    meta = obj.get("metadata") or {}
    return owner_from_labels(meta.get("labels") or {}, meta.get("ownerReferences") or ())


def _state(status: Mapping[str, Any], init: bool) -> dict[str, Any]:
    """One container's status as the fields of a :class:`ContainerState`, validated with its pod."""
    state = status.get("state") or {}
    last = (status.get("lastState") or {}).get("terminated") or {}
    which: str
    if "terminated" in state:
        which = "terminated"
    elif "waiting" in state:
        which = "waiting"
    elif "running" in state:
        which = "running"
    else:
        which = "unknown"
    detail = state.get(which) or {}
    fields = {
        "name": str(status.get("name", "")),
        "init": init,
        "ready": bool(status.get("ready")),
        "restart_count": int(status.get("restartCount") or 0),
        "state": which,
        "reason": _text(detail.get("reason")),
        "message": _text(detail.get("message")),
        "exit_code": detail.get("exitCode"),
        "signal": detail.get("signal"),
        "started_at": parse_time(detail.get("startedAt")),
        "finished_at": parse_time(detail.get("finishedAt")),
    }
    if not last:  # the usual case: no earlier run to tell
        return fields | _NO_LAST_RUN
    fields["last_reason"] = _text(last.get("reason"))
    fields["last_exit_code"] = last.get("exitCode")
    fields["last_finished_at"] = parse_time(last.get("finishedAt"))
    return fields


_NO_LAST_RUN: dict[str, Any] = {"last_reason": None, "last_exit_code": None, "last_finished_at": None}


def _resource_fields(container: Mapping[str, Any] | None) -> dict[str, dict[str, str]]:
    """A container's requests and limits as the fields of a :class:`Resources`."""
    res = (container or {}).get("resources") or {}
    return {
        "requests": {k: str(v) for k, v in (res.get("requests") or {}).items()},
        "limits": {k: str(v) for k, v in (res.get("limits") or {}).items()},
    }


def _condition_fields(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``status.conditions`` as the fields of each :class:`Condition`, validated with their object."""
    return [
        {
            "type": str(c.get("type", "")),
            "status": str(c.get("status", "Unknown")),
            "reason": _text(c.get("reason")),
            "message": _text(c.get("message")),
            "last_transition_time": parse_time(c.get("lastTransitionTime")),
        }
        for c in status.get("conditions") or ()
        if isinstance(c, dict)
    ]


def normalize_pod(
    obj: Mapping[str, Any],
    change: Change,
    job: JobRef,
    observed_at: datetime,
    log_tail: tuple[str, ...] = (),
    owner: PodOwner | None = None,
) -> PodObserved:
    """A launcher, worker or other replica pod of ``job`` as a :class:`PodObserved` (``owner``:
    :func:`pod_owner` of it, where the caller has it already)."""
    meta = _meta(obj)
    owner = owner or pod_owner(obj)
    if owner is None:
        raise MalformedObject(f"pod {meta['name']} carries no training job's labels")
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    try:
        # one validation of the whole event, its containers, conditions and resources as plain
        # fields (what PodObserved(...) of nested models validated model by model, the same checks)
        return PodObserved.model_validate(
            {
                "change": change,
                "job": job,
                "uid": meta["uid"],
                "name": meta["name"],
                "namespace": meta.get("namespace", job.namespace),
                "resource_version": meta["resourceVersion"],
                "role": owner["role"],
                "replica": owner["replica"],
                "index": owner["index"],
                "phase": status.get("phase") or "Pending",
                "reason": _text(status.get("reason")),
                "message": _text(status.get("message")),
                "node": spec.get("nodeName"),
                "conditions": _condition_fields(status),
                "containers": [
                    *(_state(s, init=True) for s in status.get("initContainerStatuses") or ()),
                    *(_state(s, init=False) for s in status.get("containerStatuses") or ()),
                ],
                "resources": _resource_fields(_main_container(spec)),
                "log_tail": scrub_lines(log_tail),
                "created_at": parse_time(meta.get("creationTimestamp")) or observed_at,
                "observed_at": observed_at,
            }
        )
    except (ValidationError, AttributeError, TypeError) as exc:
        raise MalformedObject(f"pod {meta['name']}: {exc}") from exc


def involved_object(obj: Mapping[str, Any]) -> ObjectRef:
    """``involvedObject`` of a core/v1 Event."""
    involved = obj.get("involvedObject")
    if not isinstance(involved, dict) or not involved.get("kind") or not involved.get("name"):
        raise MalformedObject("event has no involvedObject kind/name")
    return ObjectRef(kind=str(involved["kind"]), name=str(involved["name"]), uid=involved.get("uid"))


def normalize_event(
    obj: Mapping[str, Any], change: Change, job: JobRef, observed_at: datetime
) -> K8sEventObserved:
    """A core/v1 Event about ``job`` or one of its pods as a :class:`K8sEventObserved`."""
    meta = _meta(obj)
    series = obj.get("series") or {}  # events.k8s.io-style repeats (scheduler events)
    try:
        return K8sEventObserved(
            change=change,
            job=job,
            uid=meta["uid"],
            resource_version=meta["resourceVersion"],
            reason=_text(str(obj.get("reason") or "")) or "",
            message=_text(str(obj.get("message") or "")) or "",
            event_type=str(obj.get("type") or "Normal"),
            involved=involved_object(obj),
            count=int(obj.get("count") or series.get("count") or 1),
            first_timestamp=parse_time(obj.get("firstTimestamp") or obj.get("eventTime")),
            last_timestamp=parse_time(
                obj.get("lastTimestamp") or series.get("lastObservedTime") or obj.get("eventTime")
            ),
            source=(obj.get("source") or {}).get("component") or obj.get("reportingComponent"),
            observed_at=observed_at,
        )
    except (ValidationError, AttributeError, TypeError) as exc:
        raise MalformedObject(f"event {meta['name']}: {exc}") from exc


def failure_signal(kind: str, obj: Mapping[str, Any]) -> bool:
    """Whether a raw pod or event says something failed (a pod Failed or with a container that
    ended non-zero, a Warning event): published ahead of ordinary updates, as the rules read
    them ahead (:func:`controller.contract.subjects.urgent`)."""
    if kind == "event":
        return obj.get("type") == "Warning"
    if kind == "pod":
        return (obj.get("status") or {}).get("phase") == "Failed" or bool(error_terminated(obj))
    return False


def error_terminated(obj: Mapping[str, Any]) -> list[str]:
    """Names of containers that terminated with a non-zero exit: their log tail explains why."""
    statuses = (obj.get("status") or {}).get("containerStatuses") or ()
    return [
        str(s.get("name"))
        for s in statuses
        if isinstance(s, dict) and ((s.get("state") or {}).get("terminated") or {}).get("exitCode", 0) != 0
    ]
