"""Two watcher replicas with leader election: only the Lease holder watches and publishes."""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from controller.contract.settings import LeaderSettings, Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.kube.resources import WATCHED
from controller.metrics import PipelineMetrics
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from watchers.service import run_watchers_elected


async def test_only_the_leader_watches_and_a_follower_takes_over(
    sim: SimCluster, settings: Settings, topology: Topology, nats_client: NATS, js: JetStreamContext
) -> None:
    stops = [asyncio.Event(), asyncio.Event()]
    replicas = []
    with KubeGateway.for_url(sim.url) as gateway:
        for n, stop in enumerate(stops):
            replica = settings.model_copy(
                update={
                    "leader": LeaderSettings(
                        enabled=True,
                        identity=f"replica-{n}",
                        lease_namespace="mpijob-controller",
                        lease_duration_s=1.0,
                        renew_period_s=0.2,
                    )
                }
            )
            replicas.append(
                asyncio.create_task(
                    run_watchers_elected(replica, gateway, nats_client, topology, PipelineMetrics(), stop)
                )
            )
            if n == 0:
                await until(lambda: sum(sim.open_watches().values()) == len(WATCHED), 10)

        await asyncio.sleep(1.5)  # well past a lease duration: the follower must not start watching
        assert sum(sim.open_watches().values()) == len(WATCHED)
        lease = sim.get(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"namespace": "mpijob-controller", "name": "mpijob-controller-watchers"},
            }
        )
        assert lease["spec"]["holderIdentity"] == "replica-0"

        stops[0].set()  # the leader shuts down and releases the Lease
        await asyncio.wait_for(replicas[0], 10)
        await until(lambda: sim.get(lease)["spec"]["holderIdentity"] == "replica-1", 10)
        await until(lambda: sum(sim.open_watches().values()) == len(WATCHED), 10)

        stops[1].set()
        await asyncio.wait_for(replicas[1], 10)
