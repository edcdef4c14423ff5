"""What an MPIJob or TrainJob being created will ask of its namespace: pods, and their requests.

- **MPIJob** (``kubeflow.org/v2beta1``): one group of pods per entry of ``spec.mpiReplicaSpecs``
  (``Launcher``, 1 replica unless it says; ``Worker``, 0 unless it says), each pod requesting
  what its template's containers request.
- **TrainJob** (``trainer.kubeflow.org/v1alpha1``): ``spec.trainer.numNodes`` pods (1 when the
  job does not say: its runtime may add more, so this is a lower bound) of
  ``spec.trainer.resourcesPerNode``. What the runtime's template adds is not seen here.

A container requests ``resources.requests``, or its ``limits`` where a request is absent (as the
API server defaults it), or the LimitRange's ``defaultRequest`` / ``default`` for its
namespace. A pod requests the sum over its containers (init containers with
``restartPolicy: Always``, sidecars, included), or more where a regular init container asks for
more alone — the pod's effective request that ResourceQuota charges.

Quantities are read by :func:`controller.contract.quantities.quantity`, capped as the API server
caps them (``1e9999999`` is 2^63 - 1), and replicas at 2^31 - 1 (the CRDs' ``int32``), so every
sum is bounded. A value that is not a quantity is left out of the sums and named in
:attr:`Demand.unreadable`: the quota check says it cannot judge the job rather than judge it
without that value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from controller.contract.kinds import kind_named
from controller.contract.quantities import MAX_CHARS, quantity

__all__ = ["Container", "Demand", "Group", "demand", "suspended"]

Amounts = dict[str, Decimal]

MPI_DEFAULT_REPLICAS: Final = {"Launcher": 1}
"""Replicas of an MPIJob role whose spec does not say (mpi-operator's defaults; Worker: 0)."""
MAX_REPLICAS: Final = 2**31 - 1
"""Replicas read at most (the CRDs declare ``int32``); more is read as this."""
MAX_UNREADABLE: Final = 5
"""Values that are not quantities named at most in :attr:`Demand.unreadable`."""


@dataclass(frozen=True)
class Container:
    """One container of a group's pod: what it requests and is limited to (after defaults)."""

    name: str
    requests: Amounts
    limits: Amounts


@dataclass(frozen=True)
class Group:
    """``replicas`` alike pods (an MPIJob role, a TrainJob's nodes): ``role`` is ``Worker``,
    ``Launcher`` or ``node``."""

    role: str
    replicas: int
    containers: tuple[Container, ...]
    per_pod: Amounts


@dataclass(frozen=True)
class Demand:
    """What a job's pods request all together, group by group."""

    kind: str
    groups: tuple[Group, ...]
    total: Amounts = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()
    """Requests or limits that are not quantities (``cpu 'lots'``), left out of the sums."""

    @property
    def pods(self) -> int:
        return sum(group.replicas for group in self.groups)


def suspended(obj: Mapping[str, Any]) -> bool:
    """Whether the job is created suspended (Kueue's mutating webhook suspends the jobs it queues):
    MPIJob ``spec.runPolicy.suspend``, TrainJob ``spec.suspend``."""
    spec = _dict(obj.get("spec"))
    return spec.get("suspend") is True or _dict(spec.get("runPolicy")).get("suspend") is True


def demand(kind: str, obj: Mapping[str, Any], defaults: Mapping[str, Amounts] | None = None) -> Demand:
    """The pods ``obj`` (a job of any kind of :mod:`controller.contract.kinds`) will create and
    their requests; ``defaults`` are the namespace's LimitRange container defaults
    (``defaultRequest`` and ``default``, keyed so)."""
    spec = _dict(obj.get("spec"))
    defaults = defaults or {}
    groups: list[Group] = []
    unread: list[str] = []
    registered = kind_named(kind)
    if registered is not None and registered.family != "trainer" and registered.replica_specs:
        for role, raw in sorted(_dict(spec.get(registered.replica_specs)).items()):
            replica_spec = _dict(raw)
            default = MPI_DEFAULT_REPLICAS.get(role, 0) if registered.family == "mpi-operator" else 1
            replicas = _count(replica_spec.get("replicas"), default)
            pod = _dict(_dict(replica_spec.get("template")).get("spec"))
            containers = [_container(c, defaults, unread) for c in _list(pod.get("containers"))]
            inits = _list(pod.get("initContainers"))
            groups.append(_group(str(role), replicas, containers, inits, defaults, unread))
    elif kind == "TrainJob":
        trainer = _dict(spec.get("trainer"))
        nodes = _count(trainer.get("numNodes"), 1)
        node = _container({"name": "node", "resources": trainer.get("resourcesPerNode")}, defaults, unread)
        groups.append(Group("node", nodes, (node,), dict(node.requests)))
    total: Amounts = {}
    for group in groups:
        for resource, amount in group.per_pod.items():
            total[resource] = total.get(resource, Decimal(0)) + amount * group.replicas
    return Demand(kind, tuple(groups), total, tuple(unread[:MAX_UNREADABLE]))


def _group(
    role: str,
    replicas: int,
    containers: list[Container],
    inits: Sequence[Any],
    defaults: Mapping[str, Amounts],
    unread: list[str],
) -> Group:
    """The group's pod with its effective requests: containers and sidecars summed, each regular
    init container (with the sidecars started before it) taken when it asks for more."""
    per_pod: Amounts = {}
    sidecars: Amounts = {}
    alone: list[Amounts] = []
    for raw in inits:
        init = _container(raw, defaults, unread)
        if _dict(raw).get("restartPolicy") == "Always":
            containers.append(init)
            _add(sidecars, init.requests)
        else:
            alone.append(_added(dict(sidecars), init.requests))
    for container in containers:
        _add(per_pod, container.requests)
    for needs in alone:
        for resource, amount in needs.items():
            per_pod[resource] = max(per_pod.get(resource, Decimal(0)), amount)
    return Group(role, replicas, tuple(containers), per_pod)


def _container(raw: Any, defaults: Mapping[str, Amounts], unread: list[str]) -> Container:
    raw = _dict(raw)
    resources = _dict(raw.get("resources"))
    limited = _amounts(resources.get("limits"), unread)
    limits = {**defaults.get("default", {}), **limited}
    requests = {
        **defaults.get("defaultRequest", {}),
        **limited,
        **_amounts(resources.get("requests"), unread),
    }
    for resource, amount in defaults.get("default", {}).items():
        requests.setdefault(resource, amount)  # a LimitRange default limit is the request too
    return Container(str(raw.get("name") or "?"), requests, limits)


def _amounts(raw: Any, unread: list[str]) -> Amounts:
    amounts: Amounts = {}
    for resource, value in _dict(raw).items():
        try:
            amounts[str(resource)] = quantity(value)
        except ValueError:
            shown = repr(value) if len(repr(value)) <= MAX_CHARS else f"{repr(value)[:MAX_CHARS]}…"
            unread.append(f"{str(resource)[:MAX_CHARS]} {shown}")
    return amounts


def _add(into: Amounts, more: Mapping[str, Decimal]) -> None:
    for resource, amount in more.items():
        into[resource] = into.get(resource, Decimal(0)) + amount


def _added(into: Amounts, more: Mapping[str, Decimal]) -> Amounts:
    _add(into, more)
    return into


def _count(value: Any, default: int) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return min(value, MAX_REPLICAS)
    return default


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
