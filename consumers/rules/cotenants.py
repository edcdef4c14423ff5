"""Co-tenants: the other jobs a worker's node also runs, competing for its CPU, GPUs and network.

A pod's reading carries the other pods of its node and what they used
(:class:`~controller.contract.events.Neighbour`, read by :mod:`watchers.neighbours`). Grouped by
owner (the pods of one job, ReplicaSet or StatefulSet together; an unowned pod alone), a group is
a co-tenant when it uses at least ``straggler_neighbour_cores`` CPU cores between its pods, or
holds GPUs busy at ``gpu_busy_pct`` or more. Never one: the run's own pods (other workers placed
on the same node), DaemonSets and static pods (node exporters, device plugins, the GPU
operator's agents, kube-proxy), and pods of the system namespaces (:data:`SYSTEM_NAMESPACES`,
``kube-*``, ``openshift-*``): every node runs them, and they say nothing about this one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from consumers.rules.state import RunState
from consumers.rules.thresholds import RuleThresholds
from controller.contract.events import Neighbour, PodUsage

__all__ = ["SYSTEM_NAMESPACES", "CoTenant", "co_tenants", "shared_node"]

SYSTEM_NAMESPACES = frozenset({"gpu-operator", "nvidia-gpu-operator", "nvidia-network-operator"})
"""Namespaces of the node's own agents, besides those starting ``kube-`` or ``openshift-``."""
_NODE_OWNERS = frozenset({"DaemonSet", "Node"})
"""Owners of the pods every node runs (a static pod's owner is its Node)."""
_NAMED = 3
"""Co-tenants a finding names at most (those using the most)."""


@dataclass(frozen=True)
class CoTenant:
    """The pods of one other workload on the node, and what they use together."""

    namespace: str
    owner: str | None
    owner_kind: str | None
    pods: tuple[str, ...]
    cpu_cores: float
    gpus: int
    gpu_util_pct: float | None

    @property
    def weight(self) -> float:
        """CPU cores plus the GPUs' busy share: how much it takes of the node."""
        return self.cpu_cores + self.gpus * (self.gpu_util_pct or 0.0) / 100

    def text(self) -> str:
        """``3 pods of team-b/bert-large (MPIJob), using 11.5 CPU cores and 4 GPUs at 95 %``."""
        if self.owner is not None:
            kind = f" ({self.owner_kind})" if self.owner_kind else ""
            count = f"{len(self.pods)} pods" if len(self.pods) > 1 else "a pod"
            who = f"{count} of {self.namespace}/{self.owner}{kind}"
        else:
            who = f"pod {self.namespace}/{self.pods[0]}"
        using = [f"{self.cpu_cores:.1f} CPU cores"] if self.cpu_cores else []
        if self.gpus:
            busy = f" at {self.gpu_util_pct:.0f} %" if self.gpu_util_pct is not None else ""
            using.append(f"{self.gpus} GPU{'s' if self.gpus > 1 else ''}{busy}")
        return f"{who}, using {' and '.join(using)}" if using else who


def _system(n: Neighbour) -> bool:
    return (
        n.owner_kind in _NODE_OWNERS
        or n.namespace in SYSTEM_NAMESPACES
        or n.namespace.startswith(("kube-", "openshift-"))
    )


def _own(state: RunState, n: Neighbour) -> bool:
    if n.namespace != state.ref.namespace:
        return False
    return n.owner_name == state.ref.name or any(p.name == n.pod for p in state.pods.values())


def co_tenants(state: RunState, usage: PodUsage, th: RuleThresholds) -> list[CoTenant]:
    """The other workloads on the node of ``usage``'s pod that count as co-tenants (see the module
    docstring), those using the most first."""
    groups: dict[tuple[str, str], list[Neighbour]] = defaultdict(list)
    for n in usage.neighbours:
        if not _system(n) and not _own(state, n):
            groups[(n.namespace, n.owner_name or f"pod/{n.pod}")].append(n)
    found: list[CoTenant] = []
    for (namespace, _), pods in groups.items():
        util = [(n.gpus, n.gpu_util_mean_pct) for n in pods if n.gpus and n.gpu_util_mean_pct is not None]
        held = sum(g for g, _ in util)
        tenant = CoTenant(
            namespace=namespace,
            owner=pods[0].owner_name,
            owner_kind=pods[0].owner_kind,
            pods=tuple(sorted(n.pod for n in pods)),
            cpu_cores=sum(n.cpu_mean_cores or 0.0 for n in pods),
            gpus=sum(n.gpus for n in pods),
            gpu_util_pct=sum(g * u for g, u in util) / held if held else None,
        )
        busy_gpus = tenant.gpus > 0 and (tenant.gpu_util_pct or 0.0) >= th.gpu_busy_pct
        if tenant.cpu_cores >= th.straggler_neighbour_cores or busy_gpus:
            found.append(tenant)
    return sorted(found, key=lambda t: (-t.weight, t.namespace, t.pods))


def shared_node(state: RunState, node: str | None, usage: PodUsage, th: RuleThresholds) -> str | None:
    """The likely reason ``its node gpu-7 also runs 3 pods of team-b/bert-large (MPIJob), using
    11.5 CPU cores`` when the node has co-tenants (at most three named); else ``None``."""
    tenants = co_tenants(state, usage, th)
    if not tenants:
        return None
    named = [t.text() for t in tenants[:_NAMED]]
    more = len(tenants) - len(named)
    if more:
        named.append(f"{more} other workload{'s' if more > 1 else ''}")
    listed = named[0] if len(named) == 1 else "; ".join(named[:-1]) + "; and " + named[-1]
    where = f"its node {node}" if node else "its node"
    return f"{where} also runs {listed}"
