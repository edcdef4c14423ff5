"""What the launcher and worker pods use, read from the cluster's Prometheus while they run.

The leading watcher knows every pod of every run as it changes (:meth:`UsageProbe.track`);
every ``usage.refresh_s`` it asks Prometheus (:mod:`controller.prometheus`) about all the
running pods of a namespace at once — one ``query_range`` per metric and namespace, with a
pod-name matcher, never one per pod — and publishes one
:class:`~controller.contract.events.UsageObserved` per run on ``jobs.<ns>.<job>.usage``. A pod
that ended is read once more, a step after its end (the last scrape has landed), over its
whole life, and that reading is ``final``. History stores the figures; the rules read the
curves (``gpu-idle``, ``memory-near-limit``, the memory curve of ``oom``).

Series read (:func:`queries`), Prometheus doing the arithmetic so that an answer holds one value
per GPU and ``curve_points`` values per pod, however long the span:

- per GPU (instant queries over the span): ``avg_over_time`` and ``quantile_over_time(0.95, …)``
  of ``DCGM_FI_DEV_GPU_UTIL``, ``max_over_time(DCGM_FI_DEV_FB_USED)``, the framebuffer's size as
  ``last_over_time`` of ``FB_USED`` plus ``FB_FREE`` (over the span like the others: once a pod
  ended its series are stale, and an instant value would be null);
- per pod (range queries, one point per ``span / curve_points``): the mean utilization of its
  GPUs, ``sum by (pod) (max_over_time(container_memory_working_set_bytes[step]))`` (whose
  highest point is the peak: the steps tile the span) and
  ``sum by (pod) (rate(container_cpu_usage_seconds_total[2 steps]))``;
- per GPU (one range query, values at each step): DCGM's health series
  (:data:`watchers.dcgm.HEALTH_METRICS`: the last Xid, ECC and row-remap counters, NVLink error
  counters, clock-throttle reasons, temperature), read by ``gpu-fault`` and ``gpu-throttled``;
- in a running reading, what the other pods on the nodes of the pods read use
  (:mod:`watchers.neighbours`: kube-state-metrics' ``kube_pod_info`` joined with cAdvisor's CPU,
  DCGM's utilization of the nodes' GPUs), read by ``straggler`` for a node shared with another job.

Running pods are read over the window, in age classes (:data:`AGE_BUCKETS`) so that a young
pod's figures stay close to its own life; an ended pod is read with the other pods of its run.

DCGM's pod mapping labels its series with the pod's namespace and name, under
``usage.namespace_label``/``pod_label`` (a ServiceMonitor's ``exported_*``) or the fallback
labels: both are asked in one query (``A or B``). Limits and requests come from the pod's spec.

Prometheus slow or down: each namespace's queries are retried by the door, then that namespace
waits for the next refresh (``mpijc_usage_prometheus_up`` is 0, one warning per refresh); the
watch and every other observation go on. No series for a pod: its figures stay null.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import defaultdict
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from prometheus_client import CollectorRegistry

from controller.bus.publishing import Publisher
from controller.contract.events import (
    MAX_PODS_PER_READING,
    GpuHealth,
    GpuUsage,
    JobRef,
    PodRole,
    PodUsage,
    Sample,
    UsageObserved,
)
from controller.contract.quantities import quantity
from controller.contract.settings import UsageSettings
from controller.metrics import PipelineMetrics
from controller.prometheus import PrometheusError, PrometheusReader, Series, escape_regex
from watchers.correlating import Correlator
from watchers.dcgm import common_bits, health_points, health_selector
from watchers.metrics import UsageMetrics
from watchers.neighbours import NEIGHBOURS, neighbour_queries, neighbours_of
from watchers.normalizing import pod_owner
from watchers.pipeline import publish_every
from watchers.watching import WatchChange

__all__ = ["QUERY_NAMES", "UsageProbe", "queries", "reading_usage", "usage_loop"]

log = logging.getLogger(__name__)

MIB = 1024 * 1024
INSTANT = ("gpu_util_mean", "gpu_util_p95", "fb_used_max", "fb_total")
"""Per GPU, one value over the span read (instant queries)."""
CURVES = ("gpu_util_curve", "memory_curve", "cpu_curve", "gpu_health")
"""Per pod (per GPU for ``gpu_health``), ``curve_points`` values across the span (range queries)."""
QUERY_NAMES = INSTANT + CURVES + NEIGHBOURS
AGE_BUCKETS = 12
"""Running pods younger than the window are read in this many age classes per namespace, so a
young pod's figures do not reach back more than a class before its start."""
HEALTH_POINTS = 8
"""Points of a GPU health curve at most, whatever ``curve_points`` (a curve is kept as its
changes, so only a series that keeps changing is merged): a reading of
:data:`MAX_PODS_PER_READING` pods of 8 GPUs whose every health curve changes at every point
stays under 6 MiB, inside the bus's 8 MB message size."""
FINAL_TRIES = 5
"""Refreshes a pod's final reading is tried before it is given up (Prometheus down for long)."""
_ENDED = frozenset({"Succeeded", "Failed"})


@dataclass
class _Pod:
    """One pod followed: who it is, when it ran, what its spec allows."""

    uid: str
    namespace: str
    name: str
    role: PodRole
    index: int | None
    started: datetime
    ended: datetime | None
    memory_limit: float | None
    cpu_request: float | None
    node: str | None = None
    job: JobRef | None = None
    final_tries: int = 0


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _finished(status: Mapping[str, Any]) -> datetime | None:
    """When the last container of a pod ended, as its status says (``None``: not told)."""
    ends = [
        when
        for c in status.get("containerStatuses") or ()
        if (when := _time(((c.get("state") or {}).get("terminated") or {}).get("finishedAt"))) is not None
    ]
    return max(ends, default=None)


def _total(containers: Iterable[Mapping[str, Any]], kind: str, resource: str) -> float | None:
    """The sum of one resource over the containers that set it; ``None`` when none does."""
    amounts: list[Decimal] = []
    for container in containers:
        raw = ((container.get("resources") or {}).get(kind) or {}).get(resource)
        if raw is not None:
            with contextlib.suppress(ValueError):
                amounts.append(quantity(raw))
    return float(sum(amounts)) if amounts else None


def _seconds(value: float) -> str:
    return f"{math.ceil(value)}s"


def queries(
    settings: UsageSettings,
    namespace: str,
    pods: Sequence[str],
    span_s: float,
    step_s: float,
    nodes: Sequence[str] = (),
) -> dict[str, tuple[str, bool]]:
    """The PromQL of one reading of ``pods`` of one namespace over ``span_s`` (curves at ``step_s``),
    by :data:`QUERY_NAMES` (GPU ones only if ``settings.gpu``, the neighbours' only for ``nodes``),
    each with whether it is a range query: every pod in each, one value per GPU, ``curve_points``
    values per pod."""
    names = "|".join(escape_regex(p) for p in sorted(pods))
    ns = namespace.replace("\\", "\\\\").replace('"', '\\"')
    span, step = _seconds(span_s), _seconds(step_s)
    rate_window = _seconds(2 * max(step_s, settings.scrape_interval_s))

    mapped = (
        f'{settings.namespace_label}="{ns}",{settings.pod_label}=~"{names}"',
        f'{settings.fallback_namespace_label}="{ns}",{settings.fallback_pod_label}=~"{names}"',
    )

    def dcgm(metric: str) -> tuple[str, str]:
        return f"{metric}{{{mapped[0]}}}", f"{metric}{{{mapped[1]}}}"

    cadvisor = f'{{namespace="{ns}",pod=~"{names}",container!="",container!="POD"}}'
    found = {
        "memory_curve": (
            f"sum by (pod) (max_over_time(container_memory_working_set_bytes{cadvisor}[{step}]))",
            True,
        ),
        "cpu_curve": (
            f"sum by (pod) (rate(container_cpu_usage_seconds_total{cadvisor}[{rate_window}]))",
            True,
        ),
    }
    if settings.gpu:
        util, used, free = (
            dcgm("DCGM_FI_DEV_GPU_UTIL"),
            dcgm("DCGM_FI_DEV_FB_USED"),
            dcgm("DCGM_FI_DEV_FB_FREE"),
        )
        by_pod = f"{settings.pod_label}, {settings.fallback_pod_label}"
        found |= {
            "gpu_util_mean": (f"avg_over_time({util[0]}[{span}]) or avg_over_time({util[1]}[{span}])", False),
            "gpu_util_p95": (
                f"quantile_over_time(0.95, {util[0]}[{span}]) or quantile_over_time(0.95, {util[1]}[{span}])",
                False,
            ),
            "fb_used_max": (f"max_over_time({used[0]}[{span}]) or max_over_time({used[1]}[{span}])", False),
            "fb_total": (  # the last scrape within the span: the series are gone once the pod ends
                f"(last_over_time({used[0]}[{span}]) + last_over_time({free[0]}[{span}])) or "
                f"(last_over_time({used[1]}[{span}]) + last_over_time({free[1]}[{span}]))",
                False,
            ),
            "gpu_util_curve": (
                f"avg by ({by_pod}) (avg_over_time({util[0]}[{step}]) or avg_over_time({util[1]}[{step}]))",
                True,
            ),
            "gpu_health": (
                f"{health_selector(mapped[0])} or {health_selector(mapped[1])}",
                True,
            ),
        }
    return found | neighbour_queries(settings, nodes, rate_window, step)


_HEALTH_MERGE: dict[str, Callable[[Sequence[float]], float]] = {
    "throttle_reasons": common_bits,
    "xid": lambda vs: vs[-1],
}
"""How consecutive points of a health curve merge: the reasons held throughout (blips merged
never make a throttle that lasts), the last Xid seen, the highest count."""


def _when(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _curve(
    points: Iterable[tuple[float, float]], most: int, merge: Callable[[Sequence[float]], float]
) -> tuple[Sample, ...]:
    """``points`` in time order, as at most ``most`` points spanning all of them: consecutive
    points are merged (``max`` for memory, so no peak is lost; the mean for utilization), each
    merged point dated by its last one."""
    ordered = sorted(points)
    if not ordered:
        return ()
    size = math.ceil(len(ordered) / most)
    merged = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    return tuple((_when(chunk[-1][0]), round(merge([v for _, v in chunk]), 2)) for chunk in merged)


class _Answers:
    """The answers of one reading's queries, by pod (and GPU)."""

    def __init__(self, settings: UsageSettings, answers: Mapping[str, list[Series]]) -> None:
        self._settings = settings
        self.by_pod: dict[str, dict[str, list[Series]]] = defaultdict(lambda: defaultdict(list))
        self.around = {name: answers[name] for name in NEIGHBOURS if name in answers}
        for name, series in answers.items():
            if name in self.around:
                continue
            for one in series:
                pod = self._pod_of(name, one.labels)
                if pod:
                    self.by_pod[pod][name].append(one)

    def _pod_of(self, query: str, labels: Mapping[str, str]) -> str | None:
        if query in {"memory_curve", "cpu_curve"}:
            return labels.get("pod")
        return labels.get(self._settings.pod_label) or labels.get(self._settings.fallback_pod_label)

    def usage(self, pod: _Pod, since: datetime, until: datetime, step_s: float, final: bool) -> PodUsage:
        """The figures of one pod over ``[since, until]``."""
        lo, hi = since.timestamp() - step_s, until.timestamp() + step_s
        series = self.by_pod.get(pod.name, {})

        def curve(name: str) -> list[tuple[float, float]]:
            """The points of a curve within the pod's span, averaged where several series give one."""
            at: dict[float, list[float]] = defaultdict(list)
            for one in series.get(name, ()):
                for t, v in one.points:
                    if lo <= t <= hi and math.isfinite(v):
                        at[t].append(v)
            return [(t, _mean(vs)) for t, vs in sorted(at.items())]

        keep = self._settings.curve_points
        memory, cpu = curve("memory_curve"), [v for _, v in curve("cpu_curve")]
        return PodUsage(
            uid=pod.uid,
            name=pod.name,
            role=pod.role,
            index=pod.index,
            since=since,
            until=until,
            final=final,
            gpus=self._gpus(series, health_points(series.get("gpu_health", ()), lo, hi), keep),
            gpu_util_curve=_curve(curve("gpu_util_curve"), keep, _mean),
            memory_max_bytes=max((v for _, v in memory), default=None),
            memory_limit_bytes=pod.memory_limit,
            memory_curve=_curve(memory, keep, max),
            cpu_mean_cores=round(_mean(cpu), 4) if cpu else None,
            cpu_max_cores=round(max(cpu), 4) if cpu else None,
            cpu_requested_cores=pod.cpu_request,
            neighbours=()
            if final
            else neighbours_of(self._settings, self.around, pod.node, (pod.namespace, pod.name), lo, hi),
        )

    @staticmethod
    def _gpus(
        series: Mapping[str, list[Series]],
        health: Mapping[str, tuple[dict[str, str | None], dict[str, list[tuple[float, float]]]]],
        keep: int,
    ) -> tuple[GpuUsage, ...] | None:
        per_gpu: dict[str, dict[str, Any]] = defaultdict(dict)
        for name in INSTANT:
            for one in series.get(name, ()):
                gpu = one.labels.get("gpu") or one.labels.get("UUID") or "0"
                held = per_gpu[gpu]
                held["uuid"] = held.get("uuid") or one.labels.get("UUID")
                held["model"] = held.get("model") or one.labels.get("modelName")
                values = [v for _, v in one.points if math.isfinite(v)]
                if values:
                    held[name] = values[-1]
        for gpu, (where, fields) in health.items():
            per_gpu[gpu]["health"] = GpuHealth(
                **where,
                **{
                    name: _curve(points, min(keep, HEALTH_POINTS), _HEALTH_MERGE.get(name, max))
                    for name, points in fields.items()
                },
            )
        if not per_gpu:
            return None

        def mib(value: float | None) -> float | None:
            return value * MIB if value is not None else None

        return tuple(
            GpuUsage(
                gpu=gpu,
                uuid=held.get("uuid"),
                model=held.get("model"),
                util_mean_pct=round(held["gpu_util_mean"], 2) if "gpu_util_mean" in held else None,
                util_p95_pct=round(held["gpu_util_p95"], 2) if "gpu_util_p95" in held else None,
                fb_used_max_bytes=mib(held.get("fb_used_max")),
                fb_total_bytes=mib(held.get("fb_total")),
                health=held.get("health"),
            )
            for gpu, held in sorted(per_gpu.items())
        )


@dataclass(frozen=True)
class _Reading:
    """Pods of one namespace read together: the span and the curves' step they share."""

    namespace: str
    final: bool
    start: datetime
    end: datetime

    def step_s(self, settings: UsageSettings) -> float:
        span = (self.end - self.start).total_seconds()
        return max(settings.step_s, math.ceil(span / settings.curve_points))


class UsageProbe:
    """Follows the pods of every run and reads what they use (see the module docstring)."""

    def __init__(
        self,
        settings: UsageSettings,
        correlator: Correlator,
        metrics: UsageMetrics,
        reader: PrometheusReader,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._settings = settings
        self._correlator = correlator
        self._metrics = metrics
        self._reader = reader
        self._clock = clock
        self.pods: dict[str, _Pod] = {}

    @classmethod
    def configured(
        cls, settings: UsageSettings, correlator: Correlator, registry: CollectorRegistry
    ) -> UsageProbe | None:
        """The probe the settings ask for; ``None`` when no Prometheus is configured (then nothing
        is read and nothing is logged per run)."""
        if not settings.enabled:
            return None
        metrics = UsageMetrics.on(registry)
        return cls(settings, correlator, metrics, PrometheusReader(settings, observe=metrics.observe))

    async def aclose(self) -> None:
        """Close the connection to Prometheus."""
        await self._reader.aclose()

    def track(self, change: WatchChange) -> None:
        """Follow a pod from its start to its final reading."""
        obj = change.object
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        owner = pod_owner(obj)
        uid = str(meta.get("uid") or "")
        if owner is None or not uid:
            return
        held = self.pods.get(uid)
        ended = change.type == "DELETED" or status.get("phase") in _ENDED
        started = _time(status.get("startTime"))
        if started is None and (ended or status.get("phase") == "Running"):
            started = _time(meta.get("creationTimestamp"))
        if held is None:
            if started is None:  # never ran: nothing to read
                return
            if ended and self._long_over(status):  # ended before this watcher led: read by its predecessor
                return
            containers = (obj.get("spec") or {}).get("containers") or ()
            held = _Pod(
                uid=uid,
                namespace=str(meta.get("namespace")),
                name=str(meta.get("name")),
                role=owner["role"],
                index=owner["index"],
                started=started,
                ended=None,
                memory_limit=_total(containers, "limits", "memory"),
                cpu_request=_total(containers, "requests", "cpu"),
            )
            self.pods[uid] = held
        held.node = (obj.get("spec") or {}).get("nodeName") or held.node
        if held.job is None:
            held.job = self._correlator.pods.get((held.namespace, held.name))
        if held.ended is None and ended:
            held.ended = _finished(status) or self._clock()
        self._metrics.pods.set(len(self.pods))

    def _long_over(self, status: Mapping[str, Any]) -> bool:
        """Whether the pod's containers all ended more than a window ago (a relist after a restart
        or a change of leader shows every finished pod that still exists)."""
        finished = _finished(status)
        return finished is not None and (self._clock() - finished).total_seconds() > self._settings.window_s

    def _readings(self, now: datetime) -> dict[_Reading, list[_Pod]]:
        """Running pods by namespace and age class (a class spans its oldest pod, the window at
        most); ended pods, a step after their end, by namespace and run, over their lives."""
        s = self._settings
        bucket = max(s.step_s, s.window_s / AGE_BUCKETS)
        found: dict[_Reading, list[_Pod]] = defaultdict(list)
        finals: dict[tuple[str, str], list[_Pod]] = defaultdict(list)
        for pod in list(self.pods.values()):
            if pod.job is None:
                pod.job = self._correlator.pods.get((pod.namespace, pod.name))
            if pod.ended is None:
                age = (now - pod.started).total_seconds()
                span = min(s.window_s, max(math.ceil(age / bucket), 1) * bucket)
                found[_Reading(pod.namespace, False, now - timedelta(seconds=span), now)].append(pod)
            elif (now - pod.ended).total_seconds() >= s.step_s:
                finals[(pod.namespace, pod.job.uid if pod.job else pod.uid)].append(pod)
        for (namespace, _), pods in finals.items():
            end = max(p.ended or now for p in pods) + timedelta(seconds=s.step_s)
            start = max(min(p.started for p in pods), end - timedelta(seconds=s.max_span_s))
            found[_Reading(namespace, True, start, min(end, now))].extend(pods)
        return found

    async def read(self) -> list[UsageObserved]:
        """One refresh: every running pod over the last window, every pod ended a step ago over its
        life; one reading per run."""
        now = self._clock()
        readings: dict[str, list[PodUsage]] = defaultdict(list)
        jobs: dict[str, JobRef] = {}
        failed = 0
        groups = self._readings(now)
        for group in sorted(groups, key=lambda g: (g.namespace, g.final, g.start)):
            pods = groups[group]
            try:
                usages = await self._read_group(group, pods)
            except PrometheusError as exc:
                failed += 1
                if failed == 1:
                    log.warning("usage: Prometheus did not answer for namespace %s: %s", group.namespace, exc)
                for pod in pods:
                    if group.final:
                        pod.final_tries += 1
                        if pod.final_tries >= FINAL_TRIES:
                            self.pods.pop(pod.uid, None)
                continue
            for pod, usage in usages:
                if group.final:
                    self.pods.pop(pod.uid, None)
                if pod.job is None:
                    continue
                jobs[pod.job.uid] = pod.job
                readings[pod.job.uid].append(usage)
                self._metrics.readings.labels(str(group.final).lower()).inc()
        self._metrics.up.set(0 if failed else 1)
        self._metrics.pods.set(len(self.pods))
        version = str(int(now.timestamp() * 1000))
        return [
            UsageObserved(
                job=jobs[uid],
                uid=uid,
                resource_version=f"{version}-{part // MAX_PODS_PER_READING}" if part else version,
                pods=tuple(pods[part : part + MAX_PODS_PER_READING]),
                observed_at=now,
            )
            for uid, pods in readings.items()
            for part in range(0, len(pods), MAX_PODS_PER_READING)
        ]

    async def _read_group(self, group: _Reading, pods: list[_Pod]) -> list[tuple[_Pod, PodUsage]]:
        s = self._settings
        step = group.step_s(s)
        span = (group.end - group.start).total_seconds()
        nodes = [] if group.final else [p.node for p in pods if p.node]
        asked = queries(s, group.namespace, [p.name for p in pods], span, step, nodes)
        answers = await asyncio.gather(
            *(
                self._reader.query_range(promql, group.start, group.end, step)
                if ranged
                else self._reader.query(promql, group.end)
                for promql, ranged in asked.values()
            )
        )
        found = _Answers(s, dict(zip(asked, answers, strict=True)))
        return [
            (pod, found.usage(pod, max(pod.started, group.start), pod.ended or group.end, step, group.final))
            for pod in pods
        ]


async def usage_loop(
    probe: UsageProbe,
    publisher: Publisher,
    metrics: PipelineMetrics,
    interval_s: float,
    stop: asyncio.Event,
) -> None:
    """Read and publish every ``interval_s`` until ``stop`` (then close the probe's connection). A
    reading the bus did not store is counted and dropped (:func:`watchers.pipeline.publish_every`)."""
    try:
        await publish_every(probe.read, publisher, metrics, "usage", interval_s, stop)
    finally:
        await probe.aclose()


def reading_usage(
    settings: UsageSettings,
    correlator: Correlator,
    publisher: Publisher,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
    track: Callable[[WatchChange], None],
) -> tuple[list[Callable[[], Coroutine[Any, Any, None]]], Callable[[WatchChange], None]]:
    """What starts the watcher's usage loop (nothing when no Prometheus is configured) and what
    follows each pod change: ``track``, then the usage probe's."""
    probe = UsageProbe.configured(settings, correlator, metrics.registry)
    if probe is None:
        return [], track

    def both(change: WatchChange) -> None:
        track(change)
        probe.track(change)

    return [lambda: usage_loop(probe, publisher, metrics, settings.refresh_s, stop)], both
