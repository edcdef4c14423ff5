"""What the watchers watch, and the shapes of the raw Kubernetes payloads they pass around.

A :class:`Resource` names one list/watch target: an API group/version/plural plus an optional
label selector, so "pods of MPIJobs" and "pods of JobSets" are two resources over the same
``pods`` endpoint. The constants below are the complete set the controller watches — one
watch connection each, whatever the number of jobs.

Raw payloads stay plain ``dict`` objects parsed from JSON (never the client's models: for
thousands of pods, model deserialisation costs more than everything else together); the
``TypedDict`` s here document the few fields the watchers read. This module does not import
``kubernetes``, so pure code (normalisers, tests, the simulated cluster) can use it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict
from urllib.parse import quote

from controller.contract.kinds import JOBSET_NAME, KINDS, MPI_JOB_NAME, JobKind, KindSpec
from controller.contract.names import is_namespace

RawObject = dict[str, Any]
"""One Kubernetes object exactly as the API server sent it (apiVersion, kind, metadata, spec, status)."""

WatchEventType = Literal["ADDED", "MODIFIED", "DELETED"]
"""The watch event types that carry a change of an object."""

EVENT_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED"})


class RawWatchEvent(TypedDict):
    """One line of a watch stream: ``{"type": "ADDED"|…|"BOOKMARK"|"ERROR", "object": {…}}``."""

    type: str
    object: RawObject


class RawStatus(TypedDict, total=False):
    """A ``meta/v1 Status``: the body of every failed call and of watch ``ERROR`` events."""

    apiVersion: str
    kind: Literal["Status"]
    status: Literal["Success", "Failure"]
    code: int
    reason: str
    message: str
    details: dict[str, Any]


class LeaseSpec(TypedDict, total=False):
    """``coordination.k8s.io/v1 LeaseSpec``; times are MicroTime strings (``…06:41:57.000000Z``)."""

    holderIdentity: str | None
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


class Lease(TypedDict, total=False):
    """``coordination.k8s.io/v1 Lease`` as sent and received."""

    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: LeaseSpec


@dataclass(frozen=True, slots=True)
class Resource:
    """One list/watch target. ``group`` is ``""`` for the core API."""

    group: str
    version: str
    plural: str
    kind: str
    label_selector: str | None = None
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``v1`` for the core group, ``group/version`` otherwise (as in an object's ``apiVersion``)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """URL path of the collection (``name`` unset) or of one object, cluster-wide or in a namespace.
        ``ValueError`` for a namespace that is not an RFC 1123 label, or a name ``.`` or ``..``:
        the HTTP client would resolve such a segment and name another collection (``..`` the
        cluster-wide one)."""
        if namespace is not None and not is_namespace(namespace):
            raise ValueError(f"not a namespace: {namespace[:64]!r}")
        if name in (".", ".."):
            raise ValueError(f"not an object name: {name!r}")
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [prefix]
        if namespace is not None and self.namespaced:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=""))
            if subresource is not None:
                parts.append(subresource)
        return "/".join(parts)

    def __str__(self) -> str:
        """Short stable name for logs and metric labels, e.g. ``pods[training.kubeflow.org/job-name]``."""
        name = f"{self.plural}.{self.group}" if self.group else self.plural
        return f"{name}[{self.label_selector}]" if self.label_selector else name


JOB_RESOURCES: dict[JobKind, Resource] = {
    spec.kind: Resource(spec.group, spec.version, spec.plural, spec.kind) for spec in KINDS
}
"""The collection of each job kind of :data:`controller.contract.kinds.KINDS`."""
MPIJOBS = JOB_RESOURCES["MPIJob"]
TRAINJOBS = JOB_RESOURCES["TrainJob"]
MPI_PODS = Resource("", "v1", "pods", "Pod", label_selector=MPI_JOB_NAME)
"""Pods of mpi-operator and training-operator jobs: both name their job in
``training.kubeflow.org/job-name``."""
JOBSET_PODS = Resource("", "v1", "pods", "Pod", label_selector=JOBSET_NAME)
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
PODS = Resource("", "v1", "pods", "Pod")
RESOURCEQUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
LIMITRANGES = Resource("", "v1", "limitranges", "LimitRange")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
"""Nodes, cluster-wide: their conditions (kubelet's ``Ready`` and pressures, node-problem-detector's,
a GPU health monitor's) say when the node a pod runs on is degraded."""

POD_RESOURCES: tuple[Resource, ...] = (MPI_PODS, JOBSET_PODS)
"""The pod watches: one per job-name label, whatever the number of kinds that share it."""

WATCHED: tuple[Resource, ...] = (*JOB_RESOURCES.values(), *POD_RESOURCES, EVENTS, NODES)
"""Everything the watchers may watch: one connection per entry (per namespace, if restricted;
one for a cluster-scoped resource, Nodes); a job kind whose CRD the API server does not serve
is left out until it does."""


def pods_of(spec: KindSpec) -> Resource:
    """The pod watch that sees the pods of ``spec``'s jobs."""
    return next(r for r in POD_RESOURCES if r.label_selector == spec.pod_label)


def job_kinds_of(resource: Resource) -> tuple[JobKind, ...]:
    """The job kinds whose jobs (a job resource) or pods (a pod resource) a watch of ``resource`` sees."""
    if resource in POD_RESOURCES:
        return tuple(spec.kind for spec in KINDS if spec.pod_label == resource.label_selector)
    return tuple(kind for kind, r in JOB_RESOURCES.items() if r == resource)
