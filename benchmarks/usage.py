"""Usage reading: what the batched queries cost a real Prometheus, and sample → history time.

1. **Query load.** The leading watcher asks one query per figure (8: GPU utilization mean and
   p95, framebuffer used and total, per GPU; utilization, memory and CPU curves, per pod; DCGM's
   health series, per GPU) and
   namespace per refresh, whatever the number of pods; the count for 1,000 running jobs x 16
   workers (+ launchers) is computed for 1, 50 and 1,000 namespaces, beside one query per pod.
2. **Query cost, measured.** ``--jobs`` jobs x ``--workers`` workers x ``--gpus`` GPUs in
   ``--namespaces`` namespaces are served by the test exporter (DCGM- and cAdvisor-shaped
   series) to a real Prometheus (Debian's package) scraping every ``--scrape-s``; after
   ``--fill-s`` of data one refresh (every namespace over ``--window-s``) is timed, with
   Prometheus's CPU seconds for it and the watcher's own; as the same-run
   reference, the pods of one namespace are then read with one query per pod and metric.
3. **Sample → history.** A worker's working set is raised in the exporter; the time until
   Prometheus answers it (scrape), a refresh reads it, it is published and the history consumer
   has stored it where the API reads it (``--samples`` times: p50/p99). In production a refresh
   runs every ``usage.refresh_s``, which adds up to that much.
4. **Trends seen coming.** ``oom-predicted`` and ``straggler`` replayed over the curves recorded
   in ``benchmarks/data/trend_curves.json`` (synthetic, labelled so) as the watcher reads them:
   detection latency from the first symptom, lead before the limit, false positives over the
   near-miss curves, precision and recall (:mod:`benchmarks.trends`; ``--trends-only`` runs this
   part alone).

    .venv/bin/python -m benchmarks.usage [--jobs 50] [--workers 16] [--gpus 8] [--namespaces 10]
    .venv/bin/python -m benchmarks.usage --trends-only [--record]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from benchmarks import trends
from benchmarks.harness import cpu_s, pipeline_services, report, scraped_exporter
from controller.bus.publishing import Publisher
from controller.contract.settings import UsageSettings
from controller.kube.resources import MPI_PODS
from controller.prometheus import PrometheusReader
from controller.store import queries
from controller.testing.objects import mpijob, pod, with_conditions
from controller.testing.prometheus import GpuSeries, Prometheus, UsageExporter
from watchers.correlating import Correlator, Observation
from watchers.metrics import UsageMetrics
from watchers.usage import QUERY_NAMES, UsageProbe
from watchers.usage import queries as promql
from watchers.watching import WatchChange

GIB = 2**30


def query_load(jobs: int, workers: int, refresh_s: float = 60.0) -> dict[str, Any]:
    """Queries per minute for ``jobs`` running jobs, batched per namespace and one per pod."""
    per_refresh = len(QUERY_NAMES)  # per namespace
    pods = jobs * (workers + 1)
    per_minute = 60.0 / refresh_s
    return {
        "jobs": jobs,
        "pods": pods,
        "refresh_s": refresh_s,
        "queries_per_minute_batched": {
            f"{n}_namespaces": per_refresh * n * per_minute for n in (1, 50, min(jobs, 1000))
        },
        "queries_per_minute_one_per_pod": per_refresh * pods * per_minute,
    }


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cluster(
    exporter: UsageExporter, probe: UsageProbe, correlator: Correlator, args: argparse.Namespace
) -> list[tuple[str, str]]:
    """Jobs and pods told to the probe, their series served; the (namespace, pod) of every worker."""
    started = datetime.now(UTC) - timedelta(minutes=5)
    workers: list[tuple[str, str]] = []
    for j in range(args.jobs):
        namespace = f"team-{j % args.namespaces}"
        job = with_conditions(
            mpijob(f"job-{j}", namespace, args.workers, gpus=args.gpus), ("Running", "Running", _iso(started))
        )
        correlator.observe(Observation("job", "ADDED", job, started))
        for role, index in [("launcher", None), *(("worker", i) for i in range(args.workers))]:
            obj = pod(job, role, index, phase="Running")
            obj["status"]["startTime"] = _iso(started)
            correlator.observe(Observation("pod", "ADDED", obj, started))
            probe.track(WatchChange(MPI_PODS, "ADDED", obj))
            name = obj["metadata"]["name"]
            exporter.memory(namespace, name, 4 * GIB)
            exporter.cpu(namespace, name, 2.0)
            if role == "worker":
                workers.append((namespace, name))
                for gpu in range(args.gpus):
                    exporter.gpu(namespace, name, str(gpu), GpuSeries(util=85, fb_used_mib=30_000))
    return workers


async def _timed_refresh(probe: UsageProbe, prometheus_pid: int) -> dict[str, Any]:
    cpu_before, own_before, started = cpu_s(prometheus_pid), time.process_time(), time.perf_counter()
    readings = await probe.read()
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 3),
        "prometheus_cpu_s": round(cpu_s(prometheus_pid) - cpu_before, 3),
        "watcher_cpu_s": round(time.process_time() - own_before, 3),
        "pods_read": sum(len(r.pods) for r in readings),
    }


async def _ask(reader: PrometheusReader, settings: UsageSettings, namespace: str, pods: list[str]) -> None:
    end = datetime.now(UTC)
    step = max(settings.step_s, settings.window_s / settings.curve_points)
    for query, ranged in promql(settings, namespace, pods, settings.window_s, step).values():
        if ranged:
            await reader.query_range(query, end - timedelta(seconds=settings.window_s), end, step)
        else:
            await reader.query(query, end)


async def _per_pod_reference(
    reader: PrometheusReader, settings: UsageSettings, namespace: str, pods: list[str], prometheus_pid: int
) -> dict[str, Any]:
    """The same figures for one namespace asked one pod at a time."""
    cpu_before, started = cpu_s(prometheus_pid), time.perf_counter()
    for name in pods:
        await _ask(reader, settings, namespace, [name])
    batched_started, batched_cpu = time.perf_counter(), cpu_s(prometheus_pid)
    per_pod_s, per_pod_cpu = batched_started - started, batched_cpu - cpu_before
    await _ask(reader, settings, namespace, pods)
    return {
        "namespace_pods": len(pods),
        "one_query_per_pod_s": round(per_pod_s, 3),
        "one_query_per_pod_prometheus_cpu_s": round(per_pod_cpu, 3),
        "batched_s": round(time.perf_counter() - batched_started, 3),
        "batched_prometheus_cpu_s": round(cpu_s(prometheus_pid) - batched_cpu, 3),
    }


async def _sample_to_history(
    exporter: UsageExporter,
    prometheus: Prometheus,
    probe: UsageProbe,
    publisher: Publisher,
    bench: Any,
    worker: tuple[str, str],
    samples: int,
) -> dict[str, Any]:
    namespace, name = worker
    uid = next(p.uid for p in probe.pods.values() if p.name == name and p.namespace == namespace)
    run = probe.pods[uid].job
    assert run is not None
    scrape, total = [], []
    for n in range(samples):
        peak = (5 + n * 0.25) * GIB
        exporter.memory(namespace, name, peak)
        started = time.perf_counter()
        selector = f'namespace="{namespace}",pod="{name}",container!=""'
        await prometheus.scraped(f"container_memory_working_set_bytes{{{selector}}} >= {peak}")
        scrape.append(time.perf_counter() - started)
        await publisher.publish(await probe.read())
        while True:
            async with bench.engine.connect() as conn:
                rows = (await queries.run_usage(conn, [run.uid]))[run.uid]
            if any(r.pod_uid == uid and (r.memory_max_bytes or 0) >= peak for r in rows):
                break
            await asyncio.sleep(0.005)
        total.append(time.perf_counter() - started)

    def summary(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "p50_s": round(statistics.median(ordered), 3),
            "p99_s": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
        }

    return {"samples": samples, "until_prometheus_answers": summary(scrape), "until_stored": summary(total)}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with scraped_exporter(Path(tmp), args.scrape_s) as (exporter, prometheus):
            settings = UsageSettings(
                url=prometheus.url,
                step_s=args.scrape_s,
                scrape_interval_s=args.scrape_s,
                window_s=60,
                timeout_s=60,
            )
            metrics = UsageMetrics(CollectorRegistry())
            reader = PrometheusReader(settings, observe=metrics.observe)
            correlator = Correlator(pending_ttl_s=600, clock=time.monotonic)
            probe = UsageProbe(settings, correlator, metrics, reader)
            try:
                workers = _cluster(exporter, probe, correlator, args)
                await prometheus.scraped("count(DCGM_FI_DEV_GPU_UTIL) > 0", timeout_s=120)
                await asyncio.sleep(args.fill_s)
                assert prometheus.pid is not None
                refresh = await _timed_refresh(probe, prometheus.pid)
                namespace = workers[0][0]
                reference = await _per_pod_reference(
                    reader,
                    settings,
                    namespace,
                    [p.name for p in probe.pods.values() if p.namespace == namespace],
                    prometheus.pid,
                )
                async with pipeline_services(Path(tmp) / "services") as bench:
                    publisher = Publisher(bench.js, bench.topology)
                    latency = await _sample_to_history(
                        exporter, prometheus, probe, publisher, bench, workers[0], args.samples
                    )
            finally:
                await probe.aclose()
    series = args.jobs * args.workers * args.gpus * (3 + 11) + args.jobs * (args.workers + 1) * 2  # 11 health
    return {
        "load_for_1000_jobs_x_16_workers": query_load(1000, 16),
        "measured": {
            "jobs": args.jobs,
            "workers": args.workers,
            "gpus_per_worker": args.gpus,
            "namespaces": args.namespaces,
            "series": series,
            "scrape_s": args.scrape_s,
            "queries_per_refresh": len(QUERY_NAMES) * args.namespaces,
            "window_s": args.window_s,
            "refresh": refresh,
            "query_latency_s": {
                "count": metrics.sample("mpijc_usage_query_seconds_count"),
                "mean": round(
                    metrics.sample("mpijc_usage_query_seconds_sum")
                    / max(metrics.sample("mpijc_usage_query_seconds_count"), 1),
                    4,
                ),
            },
            "reference_one_namespace": reference,
        },
        "sample_to_history": latency,
        "trends": trends.measure(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--scrape-s", type=float, default=2.0)
    parser.add_argument("--fill-s", type=float, default=20.0)
    parser.add_argument("--window-s", type=float, default=3600.0)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--trends-only", action="store_true", help="only part 4 (no Prometheus, no services)")
    parser.add_argument("--record", action="store_true", help="rewrite the recorded synthetic curves first")
    args = parser.parse_args()
    if args.record:
        trends.record()
    if args.trends_only:
        report("usage_trends", trends.measure())
        return
    report("usage", asyncio.run(run(args)))


if __name__ == "__main__":
    main()
