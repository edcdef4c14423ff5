"""End to end: a run in the simulated cluster whose worker 1's GPU falls off the bus during the
run (DCGM's last Xid goes from 0 to 79), while worker 0's GPU keeps an Xid from before the job;
the watcher reads a real Prometheus scraping the exporter, publishes the readings on real NATS,
and the rules consumer's gpu-fault finding, naming worker 1, its node and its GPU, reaches the
history like any other finding — and names nothing of worker 0."""

from __future__ import annotations

from controller.testing.prometheus import GpuSeries
from tests.pipeline_fixtures import EndToEnd, scalar
from tests.usage_fixtures import Served, usage_settings


async def test_a_gpu_fault_travels_from_dcgm_through_the_bus_to_a_finding_in_history(
    served: Served,
    end_to_end: EndToEnd,
) -> None:
    settings = end_to_end.settings.model_copy(
        update={"usage": usage_settings(served.prometheus.url, refresh_s=5)}
    )
    exporter = served.exporter
    exporter.gpu(
        "team-a", "llm-worker-0", "0", GpuSeries(util=95, fb_used_mib=70_000, xid=13, hostname="gpu-0")
    )
    exporter.gpu("team-a", "llm-worker-1", "0", GpuSeries(util=95, fb_used_mib=70_000, hostname="gpu-1"))
    await served.prometheus.scraped('DCGM_FI_DEV_XID_ERRORS{exported_pod="llm-worker-1"}')

    async with end_to_end.running(settings):
        end_to_end.start_run("llm", 2, launcher=False)
        await end_to_end.until_sql("SELECT count(*) FROM pod_usage", 2, timeout_s=30)
        fault = GpuSeries(util=0, fb_used_mib=70_000, xid=79, hostname="gpu-1")
        exporter.gpu("team-a", "llm-worker-1", "0", fault)

        await end_to_end.until_sql(
            "SELECT count(*) FROM findings WHERE rule = 'gpu-fault' AND status = 'firing' "
            "AND severity = 'critical' AND root_cause LIKE "
            "'Worker 1''s GPU 0 (GPU-llm-worker-1-0) on node gpu-1 reported Xid 79: the GPU has fallen off%'",
            1,
            timeout_s=40,
        )
        assert (
            await scalar(end_to_end.engine, "SELECT count(*) FROM findings WHERE root_cause LIKE '%Xid 13%'")
            == 0
        )
