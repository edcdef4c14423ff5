"""Three ``nats-server`` processes as a JetStream cluster, streams and buckets with three replicas:
SIGKILL of the server that leads the JOBS stream in the middle of a burst loses no event, no
finding and no webhook, repeats no finding, and the watcher pipeline and the consumer process
carry on without a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.metrics import PipelineMetrics
from controller.testing.drills import drilling
from tests.bus.cluster import cluster_bus

pytestmark = pytest.mark.slow

JOBS = 40


async def test_killing_the_jobs_stream_leader_mid_burst_loses_and_repeats_nothing(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics, tmp_path: Path
) -> None:
    async with (
        cluster_bus(settings, tmp_path, "drill-watcher") as bus,
        drilling(settings, bus.topology, bus.js, engine, metrics, tmp_path) as drill,
    ):
        consumers = drill.start("consumers")
        try:
            await drill.running("consumers")

            async def kill() -> None:  # the rest of the burst is retried until a new leader answers
                bus.cluster.kill(bus.cluster.leader_of(bus.topology.stream("jobs")))

            burst = await drill.burst(JOBS, kill)
            survived = consumers.poll() is None
        finally:
            codes = drill.stop()

    assert survived and codes == {"consumers": 0}, drill.log("consumers").read_text()[-3000:]
    assert burst.outcome.complete, burst.outcome
