"""A real Prometheus scrapes a worker leaking memory toward its limit, one sawing up and down,
one whose page cache grows, one levelled off, and one whose GPUs run below its peers'; the
watcher's readings make the rules warn of the leak alone, with its projected time, and name the
straggler."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from consumers.rules import RuleEngine
from controller.contract.events import PodUsage, UsageObserved
from controller.contract.thresholds import RuleThresholds
from controller.testing.curves import sawtooth
from tests.usage_fixtures import Curves, correlator, probe_for, running_job, usage_settings

GIB = 1024**3
SERVED_S = 14
THRESHOLDS = RuleThresholds(
    oom_trend_s=10, oom_horizon_s=60, straggler_s=10, gpu_idle_s=3, memory_near_limit_ratio=0.99
)


def _pods(readings: list[UsageObserved]) -> dict[str, PodUsage]:
    return {pod.name: pod for reading in readings for pod in reading.pods}


async def test_a_leak_is_seen_coming_and_the_straggler_named_from_a_real_prometheus(curves: Curves) -> None:
    exporter, prometheus = curves.exporter, curves.prometheus
    known = correlator()
    run = running_job(known, "pi", "team-a", workers=5)
    ns = "team-a"
    exporter.memory_curve(ns, "pi-worker-0", lambda t: 9 * GIB + 0.25 * GIB * t)  # 16 GiB at 28 s
    exporter.memory_curve(ns, "pi-worker-1", sawtooth(8 * GIB, 14 * GIB, 4.0))
    exporter.memory_curve(ns, "pi-worker-2", lambda t: 6 * GIB)
    exporter.page_cache(ns, "pi-worker-2", lambda t: 2 * GIB + 0.5 * GIB * t)  # reading a dataset
    exporter.memory_curve(ns, "pi-worker-3", lambda t: 14 * GIB - 5 * GIB * 0.5 ** (t / 1.5))  # levels off
    exporter.memory_curve(ns, "pi-worker-4", lambda t: 7 * GIB)
    for index, util in enumerate([92.0, 90.0, 93.0, 91.0, 45.0]):
        for gpu in ("0", "1"):
            exporter.util_curve(ns, f"pi-worker-{index}", gpu, lambda t, u=util: u)
    await prometheus.scraped('container_memory_cache{pod="pi-worker-2"}')
    probe = probe_for(usage_settings(prometheus.url, curve_points=120), known, [run])
    await asyncio.sleep(SERVED_S)  # the curves need time to be curves: Prometheus stores what it scrapes

    try:
        readings = await probe.read()
    finally:
        await probe.aclose()

    pods = _pods(readings)
    leak = [v for _, v in pods["pi-worker-0"].memory_curve]
    assert len(leak) >= 10 and leak[-1] > leak[0] + 2 * GIB
    assert max(v for _, v in pods["pi-worker-2"].memory_curve) == 6 * GIB  # the cache is not read
    rules = RuleEngine(THRESHOLDS)
    now = datetime.now(UTC)
    findings = {f.rule: f for event in [*run.events, *readings] for f in rules.observe(event, now)}

    coming = findings["oom-predicted"]
    assert coming.root_cause.startswith("Worker 0's memory working set is growing ")
    assert "of its 16.0 GiB limit): at this rate it reaches the limit around " in coming.root_cause
    assert all(e.source == "pod/pi-worker-0" for e in coming.evidence)  # no other pod warned of
    rate = next(e.value for e in coming.evidence if e.field == "usage.memory.trend")
    assert 13.0 <= float(rate.split(" ")[0]) <= 17.0  # 0.25 GiB/s = 15 GiB/min, measured

    straggler = findings["straggler"]
    assert straggler.root_cause.startswith(
        "Worker 4 is a straggler: its GPUs have run at 45 % while its peers'"
    )
    assert "gpu-idle" not in findings
