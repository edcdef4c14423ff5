"""Phases, roles and container states from MPIJob v2beta1 and TrainJob v1alpha1 objects."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from controller.contract.events import JobRef
from controller.testing import objects as k
from watchers.normalizing import job_phase, normalize_job, normalize_pod, pod_owner

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def conditions(*types: str, false: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "conditions": [{"type": t, "status": "True"} for t in types]
        + [{"type": t, "status": "False"} for t in false]
    }


@pytest.mark.parametrize(
    ("kind", "spec", "status", "phase"),
    [
        ("MPIJob", {}, {}, "Pending"),
        ("MPIJob", {}, conditions("Created"), "Pending"),
        ("MPIJob", {}, conditions("Created", "Running"), "Running"),
        ("MPIJob", {}, conditions("Created", "Restarting"), "Running"),
        ("MPIJob", {}, conditions("Created", "Running", "Succeeded"), "Succeeded"),
        ("MPIJob", {}, conditions("Created", "Running", "Failed"), "Failed"),
        ("MPIJob", {"runPolicy": {"suspend": True}}, conditions("Created"), "Suspended"),
        ("MPIJob", {}, conditions("Created", "Suspended"), "Suspended"),
        ("MPIJob", {}, conditions("Created", false=("Running",)), "Pending"),
        ("TrainJob", {}, conditions("Created"), "Pending"),
        (
            "TrainJob",
            {},
            {**conditions("Created"), "jobsStatus": [{"name": "node", "active": 2, "ready": 2}]},
            "Running",
        ),
        ("TrainJob", {}, conditions("Created", "Complete"), "Succeeded"),
        ("TrainJob", {}, conditions("Created", "Failed"), "Failed"),
        ("TrainJob", {"suspend": True}, conditions("Created"), "Suspended"),
    ],
    ids=[
        "mpi-new",
        "mpi-created",
        "mpi-running",
        "mpi-restarting",
        "mpi-succeeded",
        "mpi-failed",
        "mpi-suspend-spec",
        "mpi-suspended-condition",
        "mpi-running-false",
        "tj-created",
        "tj-active",
        "tj-complete",
        "tj-failed",
        "tj-suspended",
    ],
)
def test_job_phase_from_conditions(
    kind: str, spec: dict[str, Any], status: dict[str, Any], phase: str
) -> None:
    assert job_phase(kind, spec, status) == phase  # type: ignore[arg-type]


def trainjob() -> k.Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": "llama",
            "namespace": "team-b",
            "uid": "0b8e7a58-4b8e-4c1e-9f0e-2d7c1f1c0a11",
            "resourceVersion": "4001",
            "creationTimestamp": "2026-11-20T10:00:00Z",
        },
        "spec": {
            "runtimeRef": {
                "name": "mpi-distributed",
                "kind": "ClusterTrainingRuntime",
                "apiGroup": "trainer.kubeflow.org",
            },
            "trainer": {
                "image": "registry.example.com/team-b/llama:1.0",
                "command": ["mpirun", "train"],
                "numNodes": 2,
                "numProcPerNode": 8,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": 8, "memory": "64Gi"}},
            },
        },
        "status": {
            "conditions": [
                {
                    "type": "Created",
                    "status": "True",
                    "reason": "JobsCreationSucceeded",
                    "lastTransitionTime": "2026-11-20T10:00:01Z",
                }
            ]
        },
    }


def test_trainjob_spec_summary() -> None:
    event = normalize_job(trainjob(), "ADDED", NOW)
    assert (event.kind, event.phase, event.spec.runtime, event.spec.workers, event.spec.slots_per_worker) == (
        "TrainJob",
        "Pending",
        "mpi-distributed",
        2,
        8,
    )
    assert event.spec.worker and event.spec.worker.resources.limits == {
        "nvidia.com/gpu": "8",
        "memory": "64Gi",
    }


def test_jobset_pods_get_role_and_index() -> None:
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "llama",
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "0",
        "batch.kubernetes.io/job-completion-index": "1",
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer",
    }
    worker = {"metadata": {"labels": labels}}
    launcher = {
        "metadata": {
            "labels": {
                **labels,
                "jobset.sigs.k8s.io/replicatedjob-name": "launcher",
                "batch.kubernetes.io/job-completion-index": "0",
            }
        }
    }
    initializer = {
        "metadata": {
            "labels": {**labels, "trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}
        }
    }
    assert pod_owner(worker) == {
        "kind": "TrainJob",
        "name": "llama",
        "role": "worker",
        "replica": None,
        "index": 1,
    }
    assert pod_owner(launcher) == {
        "kind": "TrainJob",
        "name": "llama",
        "role": "launcher",
        "replica": None,
        "index": None,
    }
    assert pod_owner(initializer) is None


def test_oomkilled_worker_container_state() -> None:
    job = k.mpijob()
    worker = k.with_container_state(
        k.pod(job, "worker", 2, node="gpu-node-a2"),
        {
            "terminated": {
                "exitCode": 137,
                "reason": "OOMKilled",
                "startedAt": "2026-11-20T10:00:20Z",
                "finishedAt": "2026-11-20T10:10:00Z",
            }
        },
        phase="Failed",
        restarts=1,
    )
    worker["status"]["containerStatuses"][0]["lastState"] = {
        "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-20T10:05:00Z"}
    }
    ref = JobRef(uid=job["metadata"]["uid"], kind="MPIJob", namespace="team-a", name="pi")

    event = normalize_pod(worker, "MODIFIED", ref, NOW, ("Killed",))

    (container,) = event.containers
    assert (event.role, event.index, event.phase, event.node) == ("worker", 2, "Failed", "gpu-node-a2")
    assert (container.state, container.reason, container.exit_code, container.restart_count) == (
        "terminated",
        "OOMKilled",
        137,
        1,
    )
    assert (container.last_reason, container.last_exit_code) == ("OOMKilled", 137)
    assert event.resources.limits["memory"] == "16Gi" and event.log_tail == ("Killed",)


def test_unknown_fields_do_not_break_normalizing() -> None:
    job = copy.deepcopy(k.mpijob())
    job["spec"]["someFutureField"] = {"x": 1}
    job["status"] = {
        "conditions": [{"type": "Created", "status": "True", "extra": "ignored"}],
        "replicaStatuses": {"Worker": {"active": 4}},
    }
    assert normalize_job(job, "MODIFIED", NOW).phase == "Pending"
