"""End to end: a run in the simulated cluster whose worker 1 sits idle while worker 0 works and
creeps up to its memory limit; the watcher reads a real Prometheus scraping the exporter,
publishes the readings on real NATS, the history stores them and the rules consumer's
findings (gpu-idle, memory-near-limit) reach the history too."""

from __future__ import annotations

import asyncio

from controller.testing.prometheus import GpuSeries
from tests.pipeline_fixtures import EndToEnd, wait_for_sql
from tests.usage_fixtures import Served, usage_settings

GIB = 2**30


async def test_usage_travels_from_prometheus_through_the_bus_to_history_and_findings(
    served: Served,
    end_to_end: EndToEnd,
) -> None:
    settings = end_to_end.settings.model_copy(
        update={
            "usage": usage_settings(served.prometheus.url, refresh_s=5),
            "rules": end_to_end.settings.rules.model_copy(update={"gpu_idle_s": 3.0}),
        }
    )
    exporter = served.exporter
    exporter.gpu("team-a", "llm-worker-0", "0", GpuSeries(util=95, fb_used_mib=70_000))
    exporter.gpu("team-a", "llm-worker-1", "0", GpuSeries(util=0, fb_used_mib=2_000))
    exporter.memory("team-a", "llm-worker-1", 6 * GIB)
    exporter.memory("team-a", "llm-launcher-x7k2p", GIB)
    await served.prometheus.scraped('DCGM_FI_DEV_GPU_UTIL{exported_pod="llm-worker-1"}')

    async with end_to_end.running(settings):
        end_to_end.start_run("llm", 2)
        for step in range(12):  # worker 0: 13.0 GiB creeping to 15.75 GiB of its 16Gi limit
            exporter.memory("team-a", "llm-worker-0", (13.0 + 0.25 * step) * GIB)
            await asyncio.sleep(1.0)

        await end_to_end.until_sql("SELECT count(*) FROM pod_usage", 3, timeout_s=20)
        await end_to_end.until_sql(
            "SELECT gpus->0->>'util_mean_pct' FROM pod_usage WHERE name = 'llm-worker-0'",
            "95.0",
        )
        await wait_for_sql(
            end_to_end.engine, "SELECT gpus IS NULL FROM pod_usage WHERE name = 'llm-launcher-x7k2p'", True
        )
        await end_to_end.until_sql(
            "SELECT count(*) FROM findings WHERE rule = 'gpu-idle' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 1''s GPUs have been idle for %'",
            1,
            timeout_s=20,
        )
        await end_to_end.until_sql(
            "SELECT count(*) FROM findings WHERE rule = 'memory-near-limit' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 0 is at %'",
            1,
            timeout_s=20,
        )
