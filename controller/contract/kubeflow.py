"""The Kubeflow and Kubernetes vocabulary every room shares: API groups, labels, resourceVersions.

Label keys are the ones the operators set (checked against upstream): mpi-operator labels
an MPIJob's launcher and worker pods with ``training.kubeflow.org/*``; Kubeflow Trainer v2
runs each TrainJob as a JobSet whose pods carry ``jobset.sigs.k8s.io/*`` and the Job's
completion index.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "API_GROUPS",
    "COMPLETION_INDEX",
    "JOBSET_JOB_INDEX",
    "JOBSET_NAME",
    "JOBSET_REPLICATED_JOB",
    "MPI_JOB_NAME",
    "MPI_JOB_ROLE",
    "MPI_REPLICA_INDEX",
    "TRAINJOB_ANCESTOR",
    "JobKind",
    "api_version",
    "resource_version_order",
]

JobKind = Literal["MPIJob", "TrainJob"]

API_GROUPS: Final[dict[JobKind, tuple[str, str]]] = {
    "MPIJob": ("kubeflow.org", "v2beta1"),
    "TrainJob": ("trainer.kubeflow.org", "v1alpha1"),
}
"""API group and version of each job kind we watch and audit."""

# mpi-operator pod labels
MPI_JOB_NAME: Final = "training.kubeflow.org/job-name"
MPI_JOB_ROLE: Final = "training.kubeflow.org/job-role"
MPI_REPLICA_INDEX: Final = "training.kubeflow.org/replica-index"
# Trainer v2: a JobSet named after the TrainJob
JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
JOBSET_REPLICATED_JOB: Final = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_JOB_INDEX: Final = "jobset.sigs.k8s.io/job-index"
COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
TRAINJOB_ANCESTOR: Final = "trainer.kubeflow.org/trainjob-ancestor-step"


def api_version(kind: JobKind) -> str:
    """``group/version`` of a job kind, as objects carry it in ``apiVersion``."""
    group, version = API_GROUPS[kind]
    return f"{group}/{version}"


def resource_version_order(resource_version: str) -> int:
    """A resourceVersion as a number to order changes of one object by.

    Kubernetes promises only that resourceVersions are opaque strings; etcd-backed API servers
    hand out increasing integers, which is what ordering relies on. Anything else orders first (0)."""
    return int(resource_version) if resource_version.isdigit() else 0
