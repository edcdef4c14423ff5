"""The kind registry drives the normalizer: every training-operator v1 kind reads its phase from
its conditions (Restarting included), its replicas from its own spec field, and its pods' labels
name the job, the replica type and the index; the registry and ``JobKind`` agree."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import get_args

import pytest

from controller.contract.kinds import KINDS, JobKind, kind_spec, owner_from_labels, speaks_for_run
from controller.kube.resources import JOB_RESOURCES, MPI_PODS, WATCHED, job_kinds_of, pods_of
from controller.testing import objects as k
from watchers.normalizing import normalize_job, normalize_pod, pod_owner

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
V1_KINDS: tuple[JobKind, ...] = ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
_V1 = {"training.kubeflow.org/operator-name": "pytorchjob-controller"}


def test_registry_names_every_kind_once_and_watches_each() -> None:
    assert tuple(spec.kind for spec in KINDS) == get_args(JobKind)
    assert set(JOB_RESOURCES) == set(get_args(JobKind))
    assert all(JOB_RESOURCES[kind] in WATCHED for kind in V1_KINDS)
    assert {kind_spec(kind).api_version for kind in V1_KINDS} == {"kubeflow.org/v1"}
    # one pod watch serves mpi-operator's and training-operator's pods: they share the job-name label
    assert {pods_of(kind_spec(kind)) for kind in ("MPIJob", *V1_KINDS)} == {MPI_PODS}
    assert job_kinds_of(MPI_PODS) == ("MPIJob", *V1_KINDS)


@pytest.mark.parametrize("kind", V1_KINDS)
def test_v1_job_reads_its_replicas_and_phase(kind: JobKind) -> None:
    job = k.training_job(kind, "demo", replicas={"Master": 1, "Worker": 3})
    observed = normalize_job(job, "ADDED", NOW)
    assert (observed.kind, observed.phase) == (kind, "Pending")
    assert observed.spec.replicas == {"Master": 1, "Worker": 3}
    assert observed.spec.workers == 4  # every rank-bearing replica
    assert observed.spec.worker is not None and observed.spec.worker.resources.limits["memory"] == "16Gi"

    running = k.with_conditions(job, ("Running", f"{kind}Running", "2026-11-20T10:01:00Z"))
    assert normalize_job(running, "MODIFIED", NOW).phase == "Running"
    restarting = k.with_conditions(running, ("Restarting", f"{kind}Restarting", "2026-11-20T10:05:00Z"))
    for condition in restarting["status"]["conditions"]:
        if condition["type"] == "Running":
            condition["status"] = "False"  # the operator drops Running while it restarts a replica
    assert normalize_job(restarting, "MODIFIED", NOW).phase == "Running"
    failed = k.with_conditions(restarting, ("Failed", f"{kind}Failed", "2026-11-20T10:09:00Z"))
    observed = normalize_job(failed, "MODIFIED", NOW)
    assert observed.phase == "Failed" and observed.finished_at is not None

    suspended = k.training_job(kind, "later")
    suspended["spec"]["runPolicy"]["suspend"] = True
    assert normalize_job(suspended, "ADDED", NOW).phase == "Suspended"


@pytest.mark.parametrize(
    ("kind", "replica", "index", "name"),
    [
        ("PyTorchJob", "Master", 0, "Master-0"),
        ("PyTorchJob", "Worker", 3, "Worker-3"),
        ("TFJob", "PS", 1, "PS-1"),
        ("TFJob", "Chief", 0, "Chief-0"),
        ("TFJob", "Evaluator", 0, "Evaluator-0"),
        ("XGBoostJob", "Worker", 2, "Worker-2"),
        ("PaddleJob", "Worker", 0, "Worker-0"),
        ("JAXJob", "Worker", 7, "Worker-7"),
    ],
    ids=str,
)
def test_v1_pod_names_its_job_replica_and_index(kind: JobKind, replica: str, index: int, name: str) -> None:
    job = k.training_job(kind, "demo", replicas={replica: index + 1})
    pod = k.replica_pod(job, replica, index)
    assert pod["metadata"]["labels"]["training.kubeflow.org/replica-type"] == replica.lower()
    assert pod_owner(pod) == {
        "kind": kind,
        "name": "demo",
        "role": "worker",
        "replica": replica,
        "index": index,
    }
    ref = normalize_job(job, "ADDED", NOW).ref
    observed = normalize_pod(pod, "ADDED", ref, NOW)
    assert (observed.role, observed.replica, observed.replica_name) == ("worker", replica, name)


def test_pod_kind_comes_from_the_operator_label_then_the_owner_then_mpi_operator() -> None:
    labels = {"training.kubeflow.org/job-name": "x", "training.kubeflow.org/replica-type": "master"}
    owners = [{"kind": "PaddleJob", "name": "x", "uid": "u"}]
    by_owner = owner_from_labels(labels, owners)
    assert by_owner is not None and (by_owner["kind"], by_owner["replica"]) == ("PaddleJob", "Master")
    with_operator = {**labels, "training.kubeflow.org/operator-name": "jaxjob-controller"}
    by_label = owner_from_labels(with_operator, owners)
    assert by_label is not None and by_label["kind"] == "JAXJob"
    legacy = owner_from_labels(
        {"training.kubeflow.org/job-name": "x", "training.kubeflow.org/job-role": "launcher"}
    )
    assert legacy == {"kind": "MPIJob", "name": "x", "role": "launcher", "replica": None, "index": None}


def test_torch_trainjob_nodes_are_workers_and_initializers_are_not_ours() -> None:
    node = {"jobset.sigs.k8s.io/jobset-name": "llama", "jobset.sigs.k8s.io/replicatedjob-name": "node"}
    owner = owner_from_labels({**node, "batch.kubernetes.io/job-completion-index": "2"})
    assert owner == {"kind": "TrainJob", "name": "llama", "role": "worker", "replica": None, "index": 2}
    initializer = {
        "jobset.sigs.k8s.io/jobset-name": "llama",
        "jobset.sigs.k8s.io/replicatedjob-name": "dataset-initializer",
        "trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer",
    }
    assert owner_from_labels(initializer) is None


@pytest.mark.parametrize(
    ("labels", "speaks"),
    [
        (
            {
                "training.kubeflow.org/job-role": "launcher",
                "training.kubeflow.org/operator-name": "mpi-operator",
            },
            True,
        ),
        ({"training.kubeflow.org/job-role": "worker", "training.kubeflow.org/replica-index": "0"}, False),
        (
            _V1
            | {"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"},
            True,
        ),
        (
            _V1
            | {"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0"},
            True,
        ),
        (
            _V1
            | {"training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "1"},
            False,
        ),
        (
            _V1 | {"training.kubeflow.org/replica-type": "ps", "training.kubeflow.org/replica-index": "0"},
            False,
        ),
    ],
    ids=["mpi-launcher", "mpi-worker", "master-0", "worker-0", "worker-1", "ps-0"],
)
def test_the_pods_probed_for_progress_are_launchers_and_rank_zero(
    labels: dict[str, str], speaks: bool
) -> None:
    owner = owner_from_labels({"training.kubeflow.org/job-name": "x", **labels})
    assert owner is not None and speaks_for_run(owner) is speaks
