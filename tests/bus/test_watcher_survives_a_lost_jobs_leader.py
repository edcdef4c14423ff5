"""A ``watch`` process probing running jobs, against the simulated API server, on a 3-server
JetStream cluster: SIGKILL of the server that leads JOBS while progress probes are being
published. The watcher keeps running and probing (a probe the bus cannot store is retried, then
dropped; never fatal), and every event, finding and webhook of the jobs that fail afterwards
arrives once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from nats.aio.msg import Msg
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.kube.resources import WATCHED
from controller.metrics import PipelineMetrics
from controller.testing.drills import drilling
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.stories import oom_story
from controller.testing.waits import until
from tests.bus.cluster import cluster_bus
from watchers.correlating import Observation

pytestmark = pytest.mark.slow

JOBS = 8
PROBE_S = 0.2
"""Every running launcher's log is probed this often: several probe batches fall in the election."""
FAILURE = 2
"""The last observations of each story (worker OOM-killed, job failed), played after the fault."""


def play(sim: SimCluster, observations: list[Observation]) -> None:
    """The cluster goes through ``observations``: each object created, or updated, in the sim."""
    for observation in observations:
        if observation.change == "ADDED":
            sim.create(dict(observation.object))
        else:
            sim.update(dict(observation.object))
        meta = observation.object["metadata"]
        if observation.log_tail:
            sim.set_log(meta["namespace"], meta["name"], "worker", "\n".join(observation.log_tail) + "\n")


async def test_the_watcher_probing_running_jobs_survives_the_jobs_leader_killed(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics, sim: SimCluster, tmp_path: Path
) -> None:
    # the cluster's own times, not a recording's: the watcher observes them now
    begun = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=30)
    stories = [oom_story(f"job-{i}", workers=3, start=begun) for i in range(JOBS)]
    async with cluster_bus(settings, tmp_path, "drill-observer") as bus:
        cluster, topology = bus.cluster, bus.topology
        probes: list[Msg] = []

        async def probed(msg: Msg) -> None:
            probes.append(msg)

        await bus.nc.subscribe(topology.wildcard("jobs").removesuffix(">") + "*.*.log", cb=probed)
        async with drilling(settings, topology, bus.js, engine, metrics, tmp_path) as drill:
            drill.start("consumers")
            watch_log = drill.log("watch")
            drill.processes["watch"] = watcher = start_cli(
                ["watch"],
                cli_env(
                    settings,
                    tmp_path,
                    MPIJC_KUBE__KUBECONFIG=str(sim.kubeconfig(tmp_path / "kubeconfig")),
                    MPIJC_NATS__REPLICAS="3",
                    MPIJC_WATCHER__PROGRESS_PROBE_S=str(PROBE_S),
                ),
                tmp_path,
                watch_log,
            )
            try:
                await drill.running("consumers")
                await until(lambda: sum(sim.open_watches().values()) == len(WATCHED), 60, watch_log.read_text)
                for story in stories:  # every job running: its launcher probed every PROBE_S
                    play(sim, story[:-FAILURE])
                    drill.fed += story[:-FAILURE]
                await until(lambda: len(probes) >= 2 * JOBS, 60, lambda: watch_log.read_text()[-2000:])

                cluster.kill(cluster.leader_of(topology.stream("jobs")))
                killed_at = len(probes)
                # probing goes on: through the election, and after it
                await until(
                    lambda: len(probes) >= killed_at + 10 * JOBS or watcher.poll() is not None,
                    120,
                    lambda: watch_log.read_text()[-2000:],
                )
                assert watcher.poll() is None, watch_log.read_text()[-3000:]

                for story in stories:  # then every job fails
                    play(sim, story[-FAILURE:])
                    drill.fed += story[-FAILURE:]
                await drill.settled(timeout_s=300)
                outcome = await drill.outcome()
                survived = watcher.poll() is None
            finally:
                codes = drill.stop()

    assert survived and codes == {"consumers": 0, "watch": 0}, watch_log.read_text()[-3000:]
    assert outcome.complete, outcome
