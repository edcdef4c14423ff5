"""Builders of raw Kubernetes objects in their real shapes, for watcher and pipeline tests.

An MPIJob ``kubeflow.org/v2beta1`` with its launcher and worker pods (mpi-operator labels), a
training-operator ``kubeflow.org/v1`` job of any kind (PyTorchJob, TFJob, …) with its replica
pods, and core/v1 Events; each builder returns a fresh dict that a test may mutate.
"""

from __future__ import annotations

import copy
import itertools
import uuid
from typing import Any

from controller.contract.kinds import (
    MPI_JOB_NAME,
    MPI_JOB_ROLE,
    MPI_REPLICA_INDEX,
    OPERATOR_NAME,
    REPLICA_TYPE,
    JobKind,
    kind_spec,
)

Obj = dict[str, Any]

_rv = itertools.count(1000)


def next_rv() -> str:
    """A strictly increasing resourceVersion, as etcd hands them out."""
    return str(next(_rv))


def _job_metadata(name: str, namespace: str, uid: str | None, created: str) -> Obj:
    """A freshly created job's metadata (a new uid unless given, the next resourceVersion)."""
    return {
        "name": name,
        "namespace": namespace,
        "uid": uid or str(uuid.uuid4()),
        "resourceVersion": next_rv(),
        "creationTimestamp": created,
        "generation": 1,
        "labels": {"team": "a"},
    }


def mpijob(
    name: str = "pi",
    namespace: str = "team-a",
    workers: int = 4,
    *,
    uid: str | None = None,
    created: str = "2026-11-20T10:00:00Z",
    memory: str = "16Gi",
    gpus: int = 8,
) -> Obj:
    """A freshly created MPIJob (no status yet)."""

    def template(image: str, resources: Obj) -> Obj:
        return {
            "spec": {
                "containers": [
                    {
                        "name": "launcher" if "launcher" in image else "worker",
                        "image": image,
                        "command": ["mpirun", "python", "train.py"],
                        "resources": resources,
                    }
                ]
            }
        }

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": _job_metadata(name, namespace, uid, created),
        "spec": {
            "slotsPerWorker": 8,
            "mpiImplementation": "OpenMPI",
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 0},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": template(
                        "registry.example.com/team-a/llm-train-launcher:2.3.1",
                        {"limits": {"cpu": "1", "memory": "2Gi"}},
                    ),
                },
                "Worker": {
                    "replicas": workers,
                    "template": template(
                        "registry.example.com/team-a/llm-train:2.3.1",
                        {
                            "limits": {"memory": memory, "nvidia.com/gpu": str(gpus)},
                            "requests": {"memory": memory, "nvidia.com/gpu": str(gpus)},
                        },
                    ),
                },
            },
        },
    }


def with_conditions(job: Obj, *conditions: tuple[str, str, str]) -> Obj:
    """A new version of ``job`` whose status has the given (type, reason, time) conditions True."""
    job = copy.deepcopy(job)
    job["metadata"]["resourceVersion"] = next_rv()
    status = job.setdefault("status", {})
    status["conditions"] = [
        *[c for c in status.get("conditions", []) if c["type"] not in {t for t, _, _ in conditions}],
        *[
            {
                "type": t,
                "status": "True",
                "reason": r,
                "message": f"{job['kind']} {job['metadata']['name']} is {t}",
                "lastTransitionTime": at,
                "lastUpdateTime": at,
            }
            for t, r, at in conditions
        ],
    ]
    for t, _, at in conditions:
        if t == "Running":
            status.setdefault("startTime", at)
        if t in {"Succeeded", "Failed"}:
            status["completionTime"] = at
    return job


def pod(
    job: Obj,
    role: str,
    index: int | None = None,
    *,
    phase: str = "Pending",
    node: str | None = None,
    created: str = "2026-11-20T10:00:02Z",
) -> Obj:
    """A launcher or worker pod of an MPIJob, as mpi-operator creates it."""
    job_name = job["metadata"]["name"]
    name = f"{job_name}-launcher-x7k2p" if role == "launcher" else f"{job_name}-worker-{index}"
    labels = {
        "training.kubeflow.org/job-name": job_name,
        "training.kubeflow.org/job-role": role,
        "training.kubeflow.org/operator-name": "mpi-operator",
    }
    if index is not None:
        labels["training.kubeflow.org/replica-index"] = str(index)
    limits = job["spec"]["mpiReplicaSpecs"]["Worker" if role == "worker" else "Launcher"]["template"]["spec"][
        "containers"
    ][0]["resources"]
    container = {"name": "worker" if role == "worker" else "launcher", "image": "img", "resources": limits}
    return _owned_pod(
        job,
        name,
        labels,
        container,
        ("kubeflow.org/v2beta1", "MPIJob"),
        phase=phase,
        node=node,
        created=created,
    )


def training_job(
    kind: JobKind = "PyTorchJob",
    name: str = "bert",
    namespace: str = "team-a",
    replicas: dict[str, int] | None = None,
    *,
    uid: str | None = None,
    created: str = "2026-11-20T10:00:00Z",
    memory: str = "16Gi",
    gpus: int = 1,
    image: str = "registry.example.com/team-a/bert-train:1.4.0",
    restart_policy: str = "OnFailure",
) -> Obj:
    """A freshly created training-operator job (``kubeflow.org/v1``) of ``kind``, with
    ``replicas`` per replica type (default: one Master and two Workers)."""
    spec = kind_spec(kind)
    assert spec.replica_specs is not None and spec.family == "training-operator", kind
    container = spec.operator_name.split("job-", 1)[0] if spec.operator_name else "main"
    command = ["torchrun", "train.py"] if kind == "PyTorchJob" else ["python", "train.py"]
    resources = {
        "limits": {"memory": memory, "nvidia.com/gpu": str(gpus)},
        "requests": {"memory": memory, "nvidia.com/gpu": str(gpus)},
    }
    return {
        "apiVersion": spec.api_version,
        "kind": kind,
        "metadata": _job_metadata(name, namespace, uid, created),
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 3},
            spec.replica_specs: {
                replica: {
                    "replicas": count,
                    "restartPolicy": restart_policy,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": container,
                                    "image": image,
                                    "command": command,
                                    "resources": resources,
                                }
                            ]
                        }
                    },
                }
                for replica, count in (replicas or {"Master": 1, "Worker": 2}).items()
            },
        },
    }


def replica_pod(
    job: Obj,
    replica: str,
    index: int = 0,
    *,
    phase: str = "Pending",
    node: str | None = None,
    created: str = "2026-11-20T10:00:02Z",
) -> Obj:
    """A pod of one replica of a training-operator job, labelled as the training-operator labels it
    (replica type lower-cased, ``job-role: master`` on the master or chief)."""
    spec = kind_spec(job["kind"])
    assert spec.replica_specs is not None and spec.operator_name is not None
    job_name = job["metadata"]["name"]
    labels = {
        MPI_JOB_NAME: job_name,
        OPERATOR_NAME: spec.operator_name,
        REPLICA_TYPE: replica.lower(),
        MPI_REPLICA_INDEX: str(index),
    }
    if replica in ("Master", "Chief"):
        labels[MPI_JOB_ROLE] = "master"
    template = job["spec"][spec.replica_specs][replica]["template"]["spec"]["containers"][0]
    container = {key: template[key] for key in ("name", "image", "resources")}
    name = f"{job_name}-{replica.lower()}-{index}"
    return _owned_pod(
        job, name, labels, container, (spec.api_version, spec.kind), phase=phase, node=node, created=created
    )


def _owned_pod(
    job: Obj,
    name: str,
    labels: dict[str, str],
    container: Obj,
    owner: tuple[str, str],
    *,
    phase: str,
    node: str | None,
    created: str,
) -> Obj:
    """A pod ``job`` (``owner``: its API version and kind) controls, in ``job``'s namespace: one
    ``container`` (its name, image and resources), still being created."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job["metadata"]["namespace"],
            "uid": str(uuid.uuid4()),
            "resourceVersion": next_rv(),
            "creationTimestamp": created,
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": owner[0],
                    "kind": owner[1],
                    "name": job["metadata"]["name"],
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": node, "containers": [container]},
        "status": {
            "phase": phase,
            "containerStatuses": [
                {
                    "name": container["name"],
                    "ready": False,
                    "restartCount": 0,
                    "image": container["image"],
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }
            ],
        },
    }


def with_container_state(
    pod_obj: Obj, state: Obj, *, phase: str, ready: bool = False, restarts: int = 0, reason: str | None = None
) -> Obj:
    """A new version of a pod with its container in ``state`` (``{"terminated": {...}}`` etc.)."""
    pod_obj = copy.deepcopy(pod_obj)
    pod_obj["metadata"]["resourceVersion"] = next_rv()
    pod_obj["status"]["phase"] = phase
    if reason:
        pod_obj["status"]["reason"] = reason
    status = pod_obj["status"]["containerStatuses"][0]
    status.update({"state": state, "ready": ready, "restartCount": restarts})
    return pod_obj


def oom_killed(pod_obj: Obj, finished_at: str | None = None) -> Obj:
    """A new version of a pod whose container the kernel killed for memory (exit 137), Failed."""
    terminated: Obj = {"exitCode": 137, "reason": "OOMKilled"}
    if finished_at:
        terminated["finishedAt"] = finished_at
    return with_container_state(pod_obj, {"terminated": terminated}, phase="Failed")


def event(
    about: Obj,
    reason: str,
    message: str,
    *,
    type_: str = "Warning",
    count: int = 1,
    at: str = "2026-11-20T10:00:05Z",
    uid: str | None = None,
) -> Obj:
    """A core/v1 Event about a pod or job."""
    meta = about["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
            "namespace": meta["namespace"],
            "uid": uid or str(uuid.uuid4()),
            "resourceVersion": next_rv(),
            "creationTimestamp": at,
        },
        "involvedObject": {
            "kind": about["kind"],
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "apiVersion": about["apiVersion"],
        },
        "reason": reason,
        "message": message,
        "type": type_,
        "source": {"component": "default-scheduler" if reason == "FailedScheduling" else "kubelet"},
        "firstTimestamp": at,
        "lastTimestamp": at,
        "count": count,
        "eventTime": None,
    }


KUBELET_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)
"""A healthy node's kubelet conditions: type, status, reason, message, as the kubelet words them."""
NPD_CONDITIONS: tuple[tuple[str, str, str, str], ...] = (
    ("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock"),
    ("ReadonlyFilesystem", "False", "FilesystemIsNotReadOnly", "Filesystem is not read-only"),
)
"""node-problem-detector's kernel monitor conditions of a healthy node (its default configuration)."""


def node(
    name: str,
    *conditions: tuple[str, str, str, str, str],
    created: str = "2026-11-01T00:00:00Z",
    gpus: int = 8,
) -> Obj:
    """A core/v1 Node as the kubelet and node-problem-detector report it: the healthy conditions
    of both, each replaced by one of ``conditions`` (type, status, reason, message,
    lastTransitionTime) of the same type, and the others added after them."""
    given = {c[0]: c for c in conditions}
    rows = [given.pop(t, (t, s, r, m, created)) for t, s, r, m in (*NPD_CONDITIONS, *KUBELET_CONDITIONS)]
    rows += given.values()
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)),
            "resourceVersion": next_rv(),
            "creationTimestamp": created,
            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true"},
        },
        "spec": {"providerID": f"aws:///us-east-1a/i-{uuid.uuid5(uuid.NAMESPACE_DNS, name).hex[:17]}"},
        "status": {
            "capacity": {"cpu": "96", "memory": "1056801264Ki", "nvidia.com/gpu": str(gpus), "pods": "110"},
            "allocatable": {
                "cpu": "95690m",
                "memory": "1045261296Ki",
                "nvidia.com/gpu": str(gpus),
                "pods": "110",
            },
            "conditions": [
                {
                    "type": t,
                    "status": s,
                    "reason": r,
                    "message": m,
                    "lastHeartbeatTime": "2026-11-20T10:00:00Z",
                    "lastTransitionTime": since,
                }
                for t, s, r, m, since in rows
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "containerRuntimeVersion": "containerd://1.7.27"},
        },
    }
