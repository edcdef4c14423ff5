"""The other pods on the nodes of the pods read, and what they use: a node shared with another job.

The watcher follows the pods of the runs only; what else runs on their nodes the cluster's
Prometheus knows. A running reading (:mod:`watchers.usage`) of pods placed on nodes (their
``spec.nodeName``) asks two more range queries, over those nodes at once:

- ``neighbour_cpu``: every pod's CPU (cAdvisor's ``container_cpu_usage_seconds_total``, its
  containers summed) joined on ``namespace``/``pod`` with kube-state-metrics'
  ``kube_pod_info{node=~…}``, which places it on its node and names its owner
  (``created_by_kind``, ``created_by_name``) — the join the kubernetes-mixin's recording rules
  make; a pod nothing owns has ``<none>`` there, read as no owner;
- ``neighbour_gpu`` (with ``usage.gpu``): the utilization of every GPU of those nodes
  (``DCGM_FI_DEV_GPU_UTIL`` by ``Hostname``, or ``hostname`` in newer dcgm-exporter releases:
  the GPU operator sets it to the node's name), each series naming the pod that holds it
  through the same pod mapping as the pods' own GPUs.

:func:`neighbours_of` turns the answers into each pod's :class:`Neighbour` s: every other pod of
its node with what it used within the pod's span, those using the most first, at most
:data:`~controller.contract.events.MAX_NEIGHBOURS`. Which of them compete (another job, not a
DaemonSet, not idle) is the rules' judgement (:mod:`consumers.rules.stragglers`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from controller.contract.events import MAX_NEIGHBOURS, Neighbour
from controller.contract.settings import UsageSettings
from controller.prometheus import Series, escape_regex

__all__ = ["NEIGHBOURS", "neighbour_queries", "neighbours_of"]

NEIGHBOURS = ("neighbour_cpu", "neighbour_gpu")
"""Per pod on the nodes of the pods read (running readings only), ``curve_points`` values each."""
_PLACED_BY = "namespace, pod, node, created_by_kind, created_by_name"


def neighbour_queries(
    settings: UsageSettings, nodes: Sequence[str], rate_window: str, step: str
) -> dict[str, tuple[str, bool]]:
    """The PromQL of :data:`NEIGHBOURS` over ``nodes`` (none when there is no node), each a range
    query; the GPU one only if ``settings.gpu``."""
    if not nodes:
        return {}
    on = "|".join(escape_regex(n) for n in sorted(set(nodes)))
    placed = f'topk by (namespace, pod) (1, max by ({_PLACED_BY}) (kube_pod_info{{node=~"{on}"}}))'
    found = {
        "neighbour_cpu": (
            f"sum by ({_PLACED_BY}) ("
            f'rate(container_cpu_usage_seconds_total{{container!="",container!="POD"}}[{rate_window}])'
            f" * on (namespace, pod) group_left (node, created_by_kind, created_by_name) {placed})",
            True,
        )
    }
    if settings.gpu:
        found["neighbour_gpu"] = (
            f'avg_over_time(DCGM_FI_DEV_GPU_UTIL{{Hostname=~"{on}"}}[{step}]) or '
            f'avg_over_time(DCGM_FI_DEV_GPU_UTIL{{hostname=~"{on}"}}[{step}])',
            True,
        )
    return found


@dataclass
class _Seen:
    """One other pod of the node as the answers show it within a span."""

    owner_kind: str | None = None
    owner_name: str | None = None
    since: float | None = None
    cpu: list[float] = field(default_factory=list)
    gpus: dict[str, list[float]] = field(default_factory=dict)

    def saw(self, points: Sequence[tuple[float, float]]) -> list[float]:
        if points:
            first = points[0][0]
            self.since = first if self.since is None else min(self.since, first)
        return [v for _, v in points]

    def neighbour(self, namespace: str, pod: str) -> Neighbour:
        util = [v for values in self.gpus.values() for v in values]
        return Neighbour(
            namespace=namespace,
            pod=pod,
            owner_kind=self.owner_kind,
            owner_name=self.owner_name,
            since=datetime.fromtimestamp(self.since, UTC) if self.since is not None else None,
            cpu_mean_cores=round(sum(self.cpu) / len(self.cpu), 4) if self.cpu else None,
            gpus=len(self.gpus),
            gpu_util_mean_pct=round(sum(util) / len(util), 2) if util else None,
        )


def _owner(value: str | None) -> str | None:
    """An owner label's value; ``None`` for kube-state-metrics' ``<none>`` (a pod nothing owns)."""
    return None if not value or value == "<none>" else value


def _within(series: Series, lo: float, hi: float) -> list[tuple[float, float]]:
    return sorted((t, v) for t, v in series.points if lo <= t <= hi and math.isfinite(v))


def neighbours_of(
    settings: UsageSettings,
    answers: Mapping[str, Sequence[Series]],
    node: str | None,
    own: tuple[str, str],
    lo: float,
    hi: float,
) -> tuple[Neighbour, ...]:
    """The pods other than ``own`` (namespace, name) the answers place on ``node``, with what
    they used within ``[lo, hi]``, those using the most first (see the module docstring)."""
    if node is None:
        return ()
    seen: dict[tuple[str, str], _Seen] = {}
    for one in answers.get("neighbour_cpu", ()):
        labels = one.labels
        key = (labels.get("namespace", ""), labels.get("pod", ""))
        points = _within(one, lo, hi)
        if labels.get("node") != node or not all(key) or not points:
            continue
        held = seen.setdefault(key, _Seen())
        held.owner_kind = _owner(labels.get("created_by_kind")) or held.owner_kind
        held.owner_name = _owner(labels.get("created_by_name")) or held.owner_name
        held.cpu.extend(held.saw(points))
    for one in answers.get("neighbour_gpu", ()):
        labels = one.labels
        key = (
            labels.get(settings.namespace_label) or labels.get(settings.fallback_namespace_label) or "",
            labels.get(settings.pod_label) or labels.get(settings.fallback_pod_label) or "",
        )
        points = _within(one, lo, hi)
        if (labels.get("Hostname") or labels.get("hostname")) != node or not all(key) or not points:
            continue
        gpu = labels.get("gpu") or labels.get("UUID") or "0"
        held = seen.setdefault(key, _Seen())
        held.gpus.setdefault(gpu, []).extend(held.saw(points))
    seen.pop(own, None)
    found = [held.neighbour(*key) for key, held in seen.items()]

    def weight(n: Neighbour) -> float:
        return (n.cpu_mean_cores or 0.0) + n.gpus * (n.gpu_util_mean_pct or 0.0) / 100

    return tuple(sorted(found, key=lambda n: (-weight(n), n.namespace, n.pod))[:MAX_NEIGHBOURS])
