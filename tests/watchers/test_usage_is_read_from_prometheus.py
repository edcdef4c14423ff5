"""The watcher reads what the pods use from a real Prometheus: one query per metric and namespace,
DCGM's pod mapping under either label pair, GPU figures null without DCGM; the readings make
the rules name an idle worker and a pod creeping up to its limit, and land in the history."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.rules import RuleEngine
from controller.contract.events import PodUsage, UsageObserved
from controller.contract.thresholds import RuleThresholds
from controller.store.history import apply_events
from controller.testing.prometheus import GpuSeries
from tests.api_fixtures import ADMIN
from tests.usage_fixtures import Served, correlator, probe_for, running_job, usage_settings

GIB = 1024**3
THRESHOLDS = RuleThresholds(gpu_idle_s=3)


def _pods(readings: list[UsageObserved]) -> dict[str, PodUsage]:
    return {pod.name: pod for reading in readings for pod in reading.pods}


async def _serve_a_run(served: Served, seconds: int = 7) -> None:
    """Worker 0 and 1 busy, worker 2 idle; worker 1's memory creeps to its 16Gi limit, worker 0
    sits flat at 94 % of it; the launcher has no GPU; team-b's pod is mapped without relabeling."""
    exporter = served.exporter
    for gpu in ("0", "1"):
        exporter.gpu("team-a", "pi-worker-0", gpu, GpuSeries(util=90, fb_used_mib=40_000))
        exporter.gpu("team-a", "pi-worker-1", gpu, GpuSeries(util=80, fb_used_mib=60_000 + int(gpu) * 1000))
        exporter.gpu("team-a", "pi-worker-2", gpu, GpuSeries(util=0, fb_used_mib=1_000))
    exporter.gpu("team-b", "nn-worker-0", "0", GpuSeries(util=50, fb_used_mib=20_000), exported=False)
    exporter.memory("team-a", "pi-launcher-x7k2p", 1 * GIB)
    exporter.memory("team-a", "pi-worker-0", 15.0 * GIB)
    exporter.memory("team-a", "pi-worker-2", 8 * GIB)
    exporter.memory("team-b", "nn-worker-0", 4 * GIB)
    exporter.cpu("team-a", "pi-worker-0", 6.0)
    await served.prometheus.scraped('DCGM_FI_DEV_GPU_UTIL{exported_pod="pi-worker-2"}')
    for second in range(seconds):  # worker 1: 13.0 GiB rising to 16.0 GiB
        working_set = (13.0 + 3.0 * second / (seconds - 1)) * GIB
        exporter.memory("team-a", "pi-worker-1", working_set)
        # each step held until Prometheus has scraped it, however late a loaded box lets it scrape
        await served.prometheus.scraped(
            f'container_memory_working_set_bytes{{namespace="team-a",pod="pi-worker-1"}} >= {working_set}'
        )
        await asyncio.sleep(1.0)


async def test_usage_is_read_per_namespace_and_judged_by_the_rules(
    served: Served, engine: AsyncEngine, api: httpx.AsyncClient
) -> None:
    known = correlator()
    pi = running_job(known, "pi", "team-a", workers=3)
    nn = running_job(known, "nn", "team-b", workers=1)
    probe = probe_for(usage_settings(served.prometheus.url), known, [pi, nn])
    await _serve_a_run(served)

    try:
        readings = await probe.read()
    finally:
        await probe.aclose()

    # one query per figure (8, and 2 of the other pods on the workers' nodes) and namespace (2),
    # whatever the number of pods
    assert probe._metrics.sample("mpijc_usage_queries_total", outcome="ok") == 20
    assert probe._metrics.sample("mpijc_usage_prometheus_up") == 1
    assert sorted(r.job.name for r in readings) == ["nn", "pi"]
    pods = _pods(readings)
    busy = pods["pi-worker-0"]
    assert busy.gpus is not None and [g.gpu for g in busy.gpus] == ["0", "1"]
    assert busy.gpus[0].util_mean_pct == 90 and busy.gpus[0].util_p95_pct == 90
    assert busy.gpus[0].fb_used_max_bytes == 40_000 * 1024**2
    assert busy.gpus[0].fb_total_bytes == 81_920 * 1024**2
    assert busy.gpus[0].model == "NVIDIA H100 80GB HBM3"
    assert busy.memory_max_bytes == 15.0 * GIB and busy.memory_limit_bytes == 16 * GIB
    assert busy.cpu_mean_cores is not None and 5.0 <= busy.cpu_mean_cores <= 7.0
    assert (
        pods["pi-worker-1"].gpus is not None
        and pods["pi-worker-1"].gpus[1].fb_used_max_bytes == 61_000 * 1024**2
    )
    launcher = pods["pi-launcher-x7k2p"]
    assert launcher.gpus is None and launcher.gpu_util_curve == ()  # no DCGM series: GPU figures null
    assert launcher.memory_max_bytes == 1 * GIB and launcher.memory_limit_bytes == 2 * GIB
    mapped_plainly = pods["nn-worker-0"]  # DCGM labels namespace/pod: the fallback labels find it
    assert mapped_plainly.gpus is not None and mapped_plainly.gpus[0].util_mean_pct == 50
    creeping = pods["pi-worker-1"].memory_curve
    assert creeping[-1][1] > 14.5 * GIB and creeping[0][1] < 14 * GIB

    rules = RuleEngine(THRESHOLDS)
    now = datetime.now(UTC)
    findings = {f.rule: f for event in [*pi.events, *readings] for f in rules.observe(event, now)}
    assert findings["gpu-idle"].root_cause.startswith("Worker 2's GPUs have been idle for ")
    assert "Worker 0" not in findings["gpu-idle"].root_cause  # busy workers are not named
    near = findings["memory-near-limit"]
    assert near.root_cause.startswith("Worker 1 is at ")  # worker 0 sits flat at 94 %: quiet
    assert "of its 16.0 GiB memory limit" in near.root_cause and "Worker 0" not in near.root_cause
    assert any(e.field == "usage.memory.workingSet" and e.value.endswith("UTC)") for e in near.evidence)

    async with engine.begin() as conn:
        await apply_events(conn, [*pi.events, *nn.events, *readings])
    body = (await api.get(f"/api/v1/runs/{pi.job['metadata']['uid']}", headers=ADMIN)).json()
    usage = {u["name"]: u for u in body["usage"]}
    assert set(usage) == {"pi-launcher-x7k2p", "pi-worker-0", "pi-worker-1", "pi-worker-2"}
    assert usage["pi-worker-0"]["memory_peak"] == "15.0 GiB of 16.0 GiB"
    assert usage["pi-launcher-x7k2p"]["gpus"] is None
    assert usage["pi-worker-2"]["gpus"][0]["util_mean_pct"] == 0
