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
    "comparable",
    "compare",
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

    Kubernetes long defined resourceVersions as opaque strings compared for equality only;
    KEP-5504 ("Comparable Resource Version", stable in Kubernetes 1.35) makes them positive
    decimal integers without leading zeros within a resource, the larger the later (client-go's
    ``CompareResourceVersion``), which etcd-backed API servers always handed out. Anything else
    orders first (0)."""
    return int(resource_version) if resource_version.isdigit() else 0


def comparable(resource_version: str | None) -> bool:
    """Whether ``resource_version`` has KEP-5504's comparable form: a positive integer without
    leading zeros."""
    return (
        resource_version is not None
        and resource_version.isascii()
        and resource_version.isdigit()
        and resource_version[:1] != "0"
    )


def compare(a: str | None, b: str | None) -> int | None:
    """-1, 0 or 1 as resourceVersion ``a`` is older than, the same as or newer than ``b`` (of the
    same resource); ``None`` when either is not :func:`comparable`."""
    if a is None or b is None or not (comparable(a) and comparable(b)):
        return None
    if len(a) != len(b):
        return -1 if len(a) < len(b) else 1
    return (a > b) - (a < b)
