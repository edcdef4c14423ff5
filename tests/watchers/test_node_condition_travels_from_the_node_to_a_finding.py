"""End to end: the simulated API server serves Nodes; a run's worker 1 sits on a node whose
kernel deadlocks during the run (node-problem-detector sets ``KernelDeadlock``). The watcher's
node watch tells the run, over real NATS, and the rules consumer's node-degraded finding, naming
worker 1, its node and the condition, reaches the history — while a node no worker uses that
deadlocks too, and worker 0's node whose disk was under pressure since before the job, name
nothing."""

from __future__ import annotations

from controller.testing import objects as k
from tests.pipeline_fixtures import EndToEnd, scalar

DEADLOCK = (
    "KernelDeadlock",
    "True",
    "KernelHasDeadlock",
    "kernel: INFO: task blocked",
    "2026-11-20T10:05:00Z",
)
OLD_PRESSURE = ("DiskPressure", "True", "KubeletHasDiskPressure", "disk is low", "2026-11-19T08:00:00Z")


async def test_a_node_condition_travels_from_the_node_watch_to_a_finding_in_history(
    end_to_end: EndToEnd,
) -> None:
    end_to_end.sim.create(k.node("gpu-0", OLD_PRESSURE))
    end_to_end.sim.create(k.node("gpu-1"))
    end_to_end.sim.create(k.node("gpu-9"))
    async with end_to_end.running():
        end_to_end.start_run("llm", 2, launcher=False)
        await end_to_end.until_sql("SELECT count(*) FROM pods WHERE phase = 'Running'", 2, timeout_s=30)
        end_to_end.sim.update(k.node("gpu-9", DEADLOCK))
        end_to_end.sim.update(k.node("gpu-1", DEADLOCK))

        await end_to_end.until_sql(
            "SELECT count(*) FROM findings WHERE rule = 'node-degraded' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 1''s node gpu-1 reported KernelDeadlock=True (KernelHasDeadlock) "
            "at 10:05:00 UTC%'",
            1,
            timeout_s=40,
        )
        assert (
            await scalar(end_to_end.engine, "SELECT count(*) FROM findings WHERE root_cause LIKE '%gpu-9%'")
            == 0
        )
        assert (
            await scalar(
                end_to_end.engine, "SELECT count(*) FROM findings WHERE root_cause LIKE '%DiskPressure%'"
            )
            == 0
        )
