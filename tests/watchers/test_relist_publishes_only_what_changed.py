"""A watcher restarted past JetStream's duplicate window republishes only the objects that changed
since it last published them: the last published version of each object survives the process in
a JetStream key-value bucket, not in memory."""

from __future__ import annotations

import asyncio

from nats.js import JetStreamContext

from controller.bus.streams import connect, ensure_streams
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from watchers.service import run_watchers


async def jobs_stream_size(js: JetStreamContext, topology: Topology) -> int:
    return (await js.stream_info(topology.stream("jobs"))).state.messages


async def watch_until_quiet(
    settings: Settings, sim: SimCluster, js: JetStreamContext, topology: Topology, expected: int
) -> PipelineMetrics:
    """Run the watchers until the JOBS stream holds ``expected`` messages, then stop them."""
    assert settings.nats.url
    metrics, stop = PipelineMetrics(), asyncio.Event()
    nc = await connect(settings.nats.url, "tests-watchers")  # as the watcher process has its own
    with KubeGateway.for_url(sim.url) as gateway:
        task = asyncio.create_task(run_watchers(settings, gateway, nc, topology, metrics, stop))
        try:
            await until(lambda: sum(sim.open_watches().values()) == 5, 10, lambda: str(sim.open_watches()))

            async def settled() -> bool:
                return await jobs_stream_size(js, topology) >= expected

            await until(settled, 15, lambda: f"stream never reached {expected} messages")
            await asyncio.sleep(0.5)  # and nothing more arrives
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
            await nc.drain()
    return metrics


async def test_a_restart_past_the_duplicate_window_republishes_only_changes(
    sim: SimCluster, settings: Settings, topology: Topology, js: JetStreamContext
) -> None:
    settings.nats.duplicate_window_s = 0.5  # past it, JetStream would store every relisted object again
    await ensure_streams(js, topology, settings.nats)
    jobs = [k.mpijob(f"train-{n}", workers=3) for n in range(5)]
    pods = [k.pod(job, "worker", i, node=f"gpu-{i}") for job in jobs for i in range(3)]
    for obj in [*jobs, *pods]:
        sim.create(obj)
    await watch_until_quiet(settings, sim, js, topology, expected=len(jobs) + len(pods))
    first = await jobs_stream_size(js, topology)
    assert first == len(jobs) + len(pods)

    await asyncio.sleep(1.0)  # the duplicate window is over
    sim.update(
        k.with_container_state(
            pods[0], {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, phase="Failed"
        )
    )
    metrics = await watch_until_quiet(settings, sim, js, topology, expected=first + 1)

    assert await jobs_stream_size(js, topology) == first + 1, "only the changed pod was published again"
    skipped = metrics.sample("mpijc_skipped_objects_total", reason="unchanged")
    assert skipped == len(jobs) + len(pods) - 1
