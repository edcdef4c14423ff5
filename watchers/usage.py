"""What the launcher and worker pods use, read from the cluster's Prometheus while they run.

The leading watcher knows every pod of every run as it changes (:meth:`UsageProbe.track`);
every ``usage.refresh_s`` it asks Prometheus (:mod:`controller.prometheus`) about all the
running pods of a namespace at once — one ``query_range`` per metric and namespace, with a
pod-name matcher, never one per pod — and publishes one
:class:`~controller.contract.events.UsageObserved` per run on ``jobs.<ns>.<job>.usage``. A pod
that ended is read once more, a step after its end (the last scrape has landed), over its
whole life, and that reading is ``final``. History stores the figures; the rules read the
curves (``gpu-idle``, ``memory-near-limit``, the memory curve of ``oom``).

Series read (:func:`queries`):

- GPU utilization: ``avg_over_time(DCGM_FI_DEV_GPU_UTIL[step])``, per pod and GPU;
- framebuffer: ``max_over_time(DCGM_FI_DEV_FB_USED[step])`` and ``FB_USED + FB_FREE`` (MiB);
- memory: ``sum by (pod) (max_over_time(container_memory_working_set_bytes[step]))``;
- CPU: ``sum by (pod) (rate(container_cpu_usage_seconds_total[2 steps]))``.

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
from controller.contract.errors import RetryableError
from controller.contract.events import GpuUsage, JobRef, PodRole, PodUsage, Sample, UsageObserved
from controller.contract.settings import UsageSettings
from controller.kube.quantities import quantity
from controller.metrics import PipelineMetrics
from controller.prometheus import PrometheusError, PrometheusReader, Series, escape_regex
from watchers.correlating import Correlator
from watchers.metrics import UsageMetrics
from watchers.normalizing import pod_owner
from watchers.watching import WatchChange

__all__ = ["QUERY_NAMES", "UsageProbe", "queries", "reading_usage", "usage_loop"]

log = logging.getLogger(__name__)

MIB = 1024 * 1024
QUERY_NAMES = ("gpu_util", "fb_used", "fb_total", "memory", "cpu")
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
    job: JobRef | None = None
    final_tries: int = 0


def _time(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return None


def _total(containers: Iterable[Mapping[str, Any]], kind: str, resource: str) -> float | None:
    """The sum of one resource over the containers that set it; ``None`` when none does."""
    amounts: list[Decimal] = []
    for container in containers:
        raw = ((container.get("resources") or {}).get(kind) or {}).get(resource)
        if raw is not None:
            with contextlib.suppress(ValueError):
                amounts.append(quantity(raw))
    return float(sum(amounts)) if amounts else None


def queries(settings: UsageSettings, namespace: str, pods: Sequence[str], step_s: float) -> dict[str, str]:
    """The PromQL of one refresh of one namespace, by :data:`QUERY_NAMES` (GPU ones only if
    ``settings.gpu``): every pod of ``pods`` in each."""
    names = "|".join(escape_regex(p) for p in sorted(pods))
    ns = namespace.replace("\\", "\\\\").replace('"', '\\"')
    step = f"{step_s:g}s"
    rate_window = f"{2 * max(step_s, settings.scrape_interval_s):g}s"

    def dcgm(metric: str) -> tuple[str, str]:
        primary = f'{metric}{{{settings.namespace_label}="{ns}",{settings.pod_label}=~"{names}"}}'
        fallback = (
            f'{metric}{{{settings.fallback_namespace_label}="{ns}",{settings.fallback_pod_label}=~"{names}"}}'
        )
        return primary, fallback

    cadvisor = f'{{namespace="{ns}",pod=~"{names}",container!="",container!="POD"}}'
    found = {
        "memory": f"sum by (pod) (max_over_time(container_memory_working_set_bytes{cadvisor}[{step}]))",
        "cpu": f"sum by (pod) (rate(container_cpu_usage_seconds_total{cadvisor}[{rate_window}]))",
    }
    if settings.gpu:
        util, used, free = (
            dcgm("DCGM_FI_DEV_GPU_UTIL"),
            dcgm("DCGM_FI_DEV_FB_USED"),
            dcgm("DCGM_FI_DEV_FB_FREE"),
        )
        found["gpu_util"] = f"avg_over_time({util[0]}[{step}]) or avg_over_time({util[1]}[{step}])"
        found["fb_used"] = f"max_over_time({used[0]}[{step}]) or max_over_time({used[1]}[{step}])"
        found["fb_total"] = f"({used[0]} + {free[0]}) or ({used[1]} + {free[1]})"
    return found


def _p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(0.95 * len(ordered)) - 1, 0)]


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
    """The answers of one namespace's queries, by pod (and GPU)."""

    def __init__(self, settings: UsageSettings, answers: Mapping[str, list[Series]]) -> None:
        self._settings = settings
        self.by_pod: dict[str, dict[str, list[Series]]] = defaultdict(lambda: defaultdict(list))
        for name, series in answers.items():
            for one in series:
                pod = self._pod_of(name, one.labels)
                if pod:
                    self.by_pod[pod][name].append(one)

    def _pod_of(self, query: str, labels: Mapping[str, str]) -> str | None:
        if query in {"memory", "cpu"}:
            return labels.get("pod")
        return labels.get(self._settings.pod_label) or labels.get(self._settings.fallback_pod_label)

    def usage(self, pod: _Pod, since: datetime, until: datetime, step_s: float, final: bool) -> PodUsage:
        """The figures of one pod over ``[since, until]``."""
        lo, hi = since.timestamp(), until.timestamp() + step_s
        series = self.by_pod.get(pod.name, {})

        def points(one: Series) -> list[tuple[float, float]]:
            return [(t, v) for t, v in one.points if lo <= t <= hi and math.isfinite(v)]

        keep = self._settings.curve_points
        gpus = self._gpus(series, points)
        util_at: dict[float, list[float]] = defaultdict(list)
        for one in series.get("gpu_util", ()):
            for t, v in points(one):
                util_at[t].append(v)
        gpu_curve = _curve([(t, sum(vs) / len(vs)) for t, vs in util_at.items()], keep, _mean)
        memory = [p for one in series.get("memory", ()) for p in points(one)]
        cpu = [v for one in series.get("cpu", ()) for _, v in points(one)]
        return PodUsage(
            uid=pod.uid,
            name=pod.name,
            role=pod.role,
            index=pod.index,
            since=since,
            until=until,
            final=final,
            gpus=gpus,
            gpu_util_curve=gpu_curve,
            memory_max_bytes=max((v for _, v in memory), default=None),
            memory_limit_bytes=pod.memory_limit,
            memory_curve=_curve(memory, keep, max),
            cpu_mean_cores=round(sum(cpu) / len(cpu), 4) if cpu else None,
            cpu_max_cores=round(max(cpu), 4) if cpu else None,
            cpu_requested_cores=pod.cpu_request,
        )

    @staticmethod
    def _gpus(
        series: Mapping[str, list[Series]], points: Callable[[Series], list[tuple[float, float]]]
    ) -> tuple[GpuUsage, ...] | None:
        per_gpu: dict[str, dict[str, Any]] = defaultdict(dict)
        for name in ("gpu_util", "fb_used", "fb_total"):
            for one in series.get(name, ()):
                gpu = one.labels.get("gpu") or one.labels.get("UUID") or "0"
                held = per_gpu[gpu]
                held.setdefault("uuid", one.labels.get("UUID"))
                held.setdefault("model", one.labels.get("modelName"))
                held.setdefault(name, []).extend(v for _, v in points(one))
        if not per_gpu:
            return None
        found: list[GpuUsage] = []
        for gpu, held in sorted(per_gpu.items()):
            util: list[float] = held.get("gpu_util", [])
            used: list[float] = held.get("fb_used", [])
            total: list[float] = held.get("fb_total", [])
            found.append(
                GpuUsage(
                    gpu=gpu,
                    uuid=held["uuid"],
                    model=held["model"],
                    util_mean_pct=round(sum(util) / len(util), 2) if util else None,
                    util_p95_pct=_p95(util) if util else None,
                    fb_used_max_bytes=max(used) * MIB if used else None,
                    fb_total_bytes=max(total) * MIB if total else None,
                )
            )
        return tuple(found)


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
        started = _time(status.get("startTime"))
        if started is None and status.get("phase") in {"Running", *_ENDED}:
            started = _time(meta.get("creationTimestamp"))
        if held is None:
            if started is None:  # never ran: nothing to read
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
        if held.job is None:
            held.job = self._correlator.pods.get((held.namespace, held.name))
        if held.ended is None and (change.type == "DELETED" or status.get("phase") in _ENDED):
            held.ended = self._clock()
        self._metrics.pods.set(len(self.pods))

    async def read(self) -> list[UsageObserved]:
        """One refresh: every running pod over the last window, every pod ended a step ago over its
        life; one reading per run."""
        s = self._settings
        now = self._clock()
        groups: dict[tuple[str, bool], list[_Pod]] = defaultdict(list)
        for pod in list(self.pods.values()):
            if pod.job is None:
                pod.job = self._correlator.pods.get((pod.namespace, pod.name))
            if pod.ended is None:
                groups[(pod.namespace, False)].append(pod)
            elif (now - pod.ended).total_seconds() >= s.step_s:
                groups[(pod.namespace, True)].append(pod)
        readings: dict[str, list[PodUsage]] = defaultdict(list)
        jobs: dict[str, JobRef] = {}
        failed = 0
        for (namespace, final), pods in sorted(groups.items()):
            try:
                usages = await self._read_namespace(namespace, pods, final, now)
            except PrometheusError as exc:
                failed += 1
                if failed == 1:
                    log.warning("usage: Prometheus did not answer for namespace %s: %s", namespace, exc)
                for pod in pods:
                    if final:
                        pod.final_tries += 1
                        if pod.final_tries >= FINAL_TRIES:
                            self.pods.pop(pod.uid, None)
                continue
            for pod, usage in usages:
                if final:
                    self.pods.pop(pod.uid, None)
                if pod.job is None:
                    continue
                jobs[pod.job.uid] = pod.job
                readings[pod.job.uid].append(usage)
                self._metrics.readings.labels(str(final).lower()).inc()
        self._metrics.up.set(0 if failed else 1)
        self._metrics.pods.set(len(self.pods))
        version = str(int(now.timestamp() * 1000))
        return [
            UsageObserved(job=jobs[uid], uid=uid, resource_version=version, pods=tuple(pods), observed_at=now)
            for uid, pods in readings.items()
        ]

    async def _read_namespace(
        self, namespace: str, pods: list[_Pod], final: bool, now: datetime
    ) -> list[tuple[_Pod, PodUsage]]:
        s = self._settings
        reach = s.max_span_s if final else s.window_s
        spans = {
            pod.uid: (max(pod.started, now - timedelta(seconds=reach)), pod.ended or now) for pod in pods
        }
        start = min(since for since, _ in spans.values())
        step = max(s.step_s, math.ceil((now - start).total_seconds() / s.max_points))
        asked = queries(s, namespace, [p.name for p in pods], step)
        answers = await asyncio.gather(
            *(self._reader.query_range(promql, start, now, step) for promql in asked.values())
        )
        found = _Answers(s, dict(zip(asked, answers, strict=True)))
        return [(pod, found.usage(pod, *spans[pod.uid], step, final)) for pod in pods]


async def usage_loop(
    probe: UsageProbe,
    publisher: Publisher,
    metrics: PipelineMetrics,
    interval_s: float,
    stop: asyncio.Event,
) -> None:
    """Read and publish every ``interval_s`` until ``stop`` (then close the probe's connection). A
    reading the bus did not store is counted and dropped: the next one reads the same span again."""
    try:
        await _refresh(probe, publisher, metrics, interval_s, stop)
    finally:
        await probe.aclose()


async def _refresh(
    probe: UsageProbe, publisher: Publisher, metrics: PipelineMetrics, interval_s: float, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
        if stop.is_set():
            return
        try:
            readings = await probe.read()
        except Exception:  # never the watcher's end: the next refresh tries again
            log.exception("usage: refresh failed")
            continue
        if not readings:
            continue
        try:
            metrics.published.labels("usage").inc(await publisher.publish(readings))
        except RetryableError as exc:
            metrics.unpublished.labels("usage").inc(len(readings))
            log.warning("%d usage readings not published: %s", len(readings), exc)


def reading_usage(
    settings: UsageSettings,
    correlator: Correlator,
    publisher: Publisher,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
    track: Callable[[WatchChange], None],
) -> tuple[list[Coroutine[Any, Any, None]], Callable[[WatchChange], None]]:
    """The watcher's usage loop (none when no Prometheus is configured) and what follows each pod
    change: ``track``, then the usage probe's."""
    probe = UsageProbe.configured(settings, correlator, metrics.registry)
    if probe is None:
        return [], track

    def both(change: WatchChange) -> None:
        track(change)
        probe.track(change)

    return [usage_loop(probe, publisher, metrics, settings.refresh_s, stop)], both
