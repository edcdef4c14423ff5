"""Three ``nats-server`` processes as a JetStream cluster, streams and buckets with three replicas:
SIGKILL of the server that leads the JOBS stream in the middle of a burst loses no event, no
finding and no webhook, repeats no finding, and the watcher pipeline and the consumer process
carry on without a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.streams import connect
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing.drills import Drill
from controller.testing.natscluster import NatsCluster
from controller.testing.receivers import Receiver
from tests.bus.cluster import declare_streams

pytestmark = pytest.mark.slow

JOBS = 40


async def test_killing_the_jobs_stream_leader_mid_burst_loses_and_repeats_nothing(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics, tmp_path: Path
) -> None:
    with NatsCluster(tmp_path / "nats") as cluster:
        settings.nats = NatsSettings(url=cluster.url, prefix=settings.nats.prefix, replicas=3)
        topology = Topology(settings.nats.prefix)
        nc = await connect(cluster.url, "drill-watcher")
        js = nc.jetstream()
        await declare_streams(js, topology, settings.nats)
        async with Receiver() as rx:
            drill = Drill(settings, topology, js, engine, metrics, tmp_path, rx)
            await drill.subscribe()
            consumers = drill.start("consumers")
            try:
                await drill.running("consumers")

                async def kill() -> None:  # the rest of the burst is retried until a new leader answers
                    cluster.kill(cluster.leader_of(topology.stream("jobs")))

                burst = await drill.burst(JOBS, kill)
                survived = consumers.poll() is None
            finally:
                codes = drill.stop()
        await nc.close()

    assert survived and codes == {"consumers": 0}, drill.log("consumers").read_text()[-3000:]
    assert burst.outcome.complete, burst.outcome
