"""The Kubeflow and Kubernetes vocabulary every room shares: API groups, labels, resourceVersions.

The kinds themselves, their groups and their pods' labels live in one registry,
:mod:`controller.contract.kinds`; this module keeps the names older code imports from here.
"""

from __future__ import annotations

from typing import Final

from controller.contract.kinds import (
    COMPLETION_INDEX,
    JOBSET_JOB_INDEX,
    JOBSET_NAME,
    JOBSET_REPLICATED_JOB,
    KINDS,
    MPI_JOB_NAME,
    MPI_JOB_ROLE,
    MPI_REPLICA_INDEX,
    TRAINJOB_ANCESTOR,
    JobKind,
    kind_spec,
)

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

API_GROUPS: Final[dict[JobKind, tuple[str, str]]] = {spec.kind: (spec.group, spec.version) for spec in KINDS}
"""API group and version of each job kind we watch and audit."""


def api_version(kind: JobKind) -> str:
    """``group/version`` of a job kind, as objects carry it in ``apiVersion``."""
    return kind_spec(kind).api_version


def resource_version_order(resource_version: str) -> int:
    """A resourceVersion as a number to order changes of one object by: the one order of
    resourceVersions in the project (:func:`comparable`, :func:`compare` and the stored
    columns all follow it).

    Kubernetes long defined resourceVersions as opaque strings compared for equality only;
    KEP-5504 ("Comparable Resource Version", stable in Kubernetes 1.35) makes them positive
    decimal integers without leading zeros within a resource, the larger the later (client-go's
    ``CompareResourceVersion``), which etcd-backed API servers always handed out. Anything else
    orders first (0)."""
    return int(resource_version) if comparable(resource_version) else 0


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
    same resource, by :func:`resource_version_order`); ``None`` when either is not
    :func:`comparable`."""
    if a is None or b is None or not (comparable(a) and comparable(b)):
        return None
    first, second = resource_version_order(a), resource_version_order(b)
    return (first > second) - (first < second)
