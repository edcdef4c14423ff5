"""Whether a job's pods fit its namespace's ResourceQuotas and LimitRanges, and in words why not.

**ResourceQuota**: for each quota without scopes, what is left (``status.hard - status.used``,
``spec.hard`` while the quota controller has not filled the status yet, nothing used then) of

- ``requests.cpu`` / ``cpu``, ``requests.memory`` / ``memory``, ``requests.<extended>`` (such as
  ``requests.nvidia.com/gpu``; quotas take extended resources only so) and every other
  ``requests.*`` the job asks for;
- ``pods`` / ``count/pods``;

against what all the job's pods request together. A quota with ``scopes`` or a
``scopeSelector`` (priority classes, BestEffort, Terminating) is not judged: which of the pods
it covers is not read here; the ``quota`` finding reports a refusal once pods are created.

**LimitRange**: each container's limit (its request where it has none) against ``max`` of a
``Container`` item, each request against ``min``, and a pod's sum against a ``Pod`` item's
``max``: such a pod is refused whatever the quota says.

Each problem is one sentence (an admission warning; kubectl prints each as ``Warning: …``),
naming the object and the numbers, e.g. ``ResourceQuota team-a/gpu-quota: this MPIJob requests
64 nvidia.com/gpu (16 Workers x 4), 8 of 32 are left``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, Final

from controller.contract.quantities import quantity, show
from watchers.admission.demand import Amounts, Demand, Group

__all__ = ["MAX_PROBLEMS", "container_defaults", "problems"]

MAX_PROBLEMS: Final = 10
"""Sentences returned at most (the API server keeps warnings short: 4 KiB in all)."""

_POD_KEYS: Final = ("pods", "count/pods")
_BASIC: Final = frozenset({"cpu", "memory", "ephemeral-storage"})


def _quota_keys(resource: str) -> tuple[str, ...]:
    """The quota keys that bound the requests of ``resource``."""
    if resource in _BASIC:
        return f"requests.{resource}", resource
    return (f"requests.{resource}",)


def container_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> dict[str, Amounts]:
    """The ``default`` and ``defaultRequest`` of the ``Container`` items of ``limit_ranges``."""
    defaults: dict[str, Amounts] = {"default": {}, "defaultRequest": {}}
    for item in _items(limit_ranges, "Container"):
        for key, into in defaults.items():
            into.update(_amounts(item.get(key)))
    return defaults


def problems(
    demand: Demand, quotas: Iterable[Mapping[str, Any]], limit_ranges: Iterable[Mapping[str, Any]]
) -> list[str]:
    """What will not fit, one sentence each (at most :data:`MAX_PROBLEMS`); empty when all fits."""
    found: list[str] = []
    for quota in sorted(quotas, key=_name):
        found += _over_quota(demand, quota)
    for limit_range in sorted(limit_ranges, key=_name):
        found += _outside_limits(demand, limit_range)
    return found[:MAX_PROBLEMS]


def _over_quota(demand: Demand, quota: Mapping[str, Any]) -> list[str]:
    spec, status = _dict(quota.get("spec")), _dict(quota.get("status"))
    if spec.get("scopes") or spec.get("scopeSelector"):
        return []
    hard = _amounts(status.get("hard")) or _amounts(spec.get("hard"))
    used = _amounts(status.get("used"))
    where = f"ResourceQuota {_name(quota)}"
    found: list[str] = []
    for resource, amount in sorted(demand.total.items()):
        for key in _quota_keys(resource):
            if key in hard and amount > (left := hard[key] - used.get(key, Decimal(0))):
                found.append(
                    f"{where}: this {demand.kind} requests {show(resource, amount)} {resource} "
                    f"({_breakdown(demand.groups, resource)}), {_left(resource, left, hard[key])}"
                )
                break
    pods = Decimal(demand.pods)
    for key in _POD_KEYS:
        if key in hard and pods > (left := hard[key] - used.get(key, Decimal(0))):
            found.append(
                f"{where}: this {demand.kind} creates {demand.pods} pods "
                f"({_breakdown(demand.groups, None)}), {_left('pods', left, hard[key])}"
            )
            break
    return found


def _outside_limits(demand: Demand, limit_range: Mapping[str, Any]) -> list[str]:
    where = f"LimitRange {_name(limit_range)}"
    found: list[str] = []
    containers = _items([limit_range], "Container")
    pods = _items([limit_range], "Pod")
    for group in demand.groups:
        pods_of = "each node" if demand.kind == "TrainJob" else f"the {group.role} pods"
        for item in containers:
            most, least = _amounts(item.get("max")), _amounts(item.get("min"))
            for container in group.containers:
                for resource, bound in sorted(most.items()):
                    value = container.limits.get(resource, container.requests.get(resource))
                    if value is not None and value > bound:
                        found.append(
                            f"{where}: container {container.name!r} of {pods_of} asks for "
                            f"{show(resource, value)} {resource}, at most {show(resource, bound)} per "
                            "container"
                        )
                for resource, bound in sorted(least.items()):
                    value = container.requests.get(resource)
                    if value is not None and value < bound:
                        found.append(
                            f"{where}: container {container.name!r} of {pods_of} requests "
                            f"{show(resource, value)} {resource}, at least {show(resource, bound)} per "
                            "container"
                        )
        for item in pods:
            for resource, bound in sorted(_amounts(item.get("max")).items()):
                value = group.per_pod.get(resource)
                if value is not None and value > bound:
                    found.append(
                        f"{where}: {pods_of} request {show(resource, value)} {resource} per pod, "
                        f"at most {show(resource, bound)} per pod"
                    )
    return found


def _breakdown(groups: Iterable[Group], resource: str | None) -> str:
    """``16 Workers x 4 + 1 Launcher x 1`` (pods x per pod), or ``16 Workers + 1 Launcher``."""
    parts: list[str] = []
    for group in groups:
        label = _plural(group.role, group.replicas)
        if resource is None:
            parts.append(f"{group.replicas} {label}")
        elif (each := group.per_pod.get(resource)) and group.replicas:
            parts.append(f"{group.replicas} {label} x {show(resource, each)}")
    return " + ".join(parts)


def _plural(role: str, count: int) -> str:
    return role if count == 1 else f"{role}s"


def _left(resource: str, left: Decimal, hard: Decimal) -> str:
    if left <= 0:
        return f"none of {show(resource, hard)} is left"
    return f"{show(resource, left)} of {show(resource, hard)} {'is' if left == 1 else 'are'} left"


def _items(limit_ranges: Iterable[Mapping[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [
        item
        for limit_range in limit_ranges
        for item in _dict(limit_range.get("spec")).get("limits") or []
        if isinstance(item, dict) and item.get("type") == kind
    ]


def _amounts(raw: Any) -> Amounts:
    amounts: Amounts = {}
    for key, value in _dict(raw).items():
        try:
            amounts[str(key)] = quantity(value)
        except ValueError:
            continue
    return amounts


def _name(obj: Mapping[str, Any]) -> str:
    metadata = _dict(obj.get("metadata"))
    return f"{metadata.get('namespace') or '?'}/{metadata.get('name') or '?'}"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
