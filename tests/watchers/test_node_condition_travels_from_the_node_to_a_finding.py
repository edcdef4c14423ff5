"""End to end: the simulated API server serves Nodes; a run's worker 1 sits on a node whose
kernel deadlocks during the run (node-problem-detector sets ``KernelDeadlock``). The watcher's
node watch tells the run, over real NATS, and the rules consumer's node-degraded finding, naming
worker 1, its node and the condition, reaches the history — while a node no worker uses that
deadlocks too, and worker 0's node whose disk was under pressure since before the job, name
nothing."""

from __future__ import annotations

from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.history.test_end_to_end_watch_to_history import controller_running, scalar, wait_for_sql

DEADLOCK = (
    "KernelDeadlock",
    "True",
    "KernelHasDeadlock",
    "kernel: INFO: task blocked",
    "2026-11-20T10:05:00Z",
)
OLD_PRESSURE = ("DiskPressure", "True", "KubeletHasDiskPressure", "disk is low", "2026-11-19T08:00:00Z")


async def test_a_node_condition_travels_from_the_node_watch_to_a_finding_in_history(
    sim: SimCluster,
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> None:
    sim.create(k.node("gpu-0", OLD_PRESSURE))
    sim.create(k.node("gpu-1"))
    sim.create(k.node("gpu-9"))
    async with controller_running(settings, sim, js, topology, engine, metrics):
        job = k.mpijob("llm", workers=2, gpus=1)
        sim.create(job)
        sim.update(k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z")))
        for pod in [k.pod(job, "worker", i, node=f"gpu-{i}") for i in range(2)]:
            sim.create(pod)
            sim.update(k.with_container_state(pod, {"running": {}}, phase="Running", ready=True))
        await wait_for_sql(engine, "SELECT count(*) FROM pods WHERE phase = 'Running'", 2, timeout_s=30)
        sim.update(k.node("gpu-9", DEADLOCK))
        sim.update(k.node("gpu-1", DEADLOCK))

        await wait_for_sql(
            engine,
            "SELECT count(*) FROM findings WHERE rule = 'node-degraded' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 1''s node gpu-1 reported KernelDeadlock=True (KernelHasDeadlock) "
            "at 10:05:00 UTC%'",
            1,
            timeout_s=40,
        )
        assert await scalar(engine, "SELECT count(*) FROM findings WHERE root_cause LIKE '%gpu-9%'") == 0
        assert (
            await scalar(engine, "SELECT count(*) FROM findings WHERE root_cause LIKE '%DiskPressure%'") == 0
        )
