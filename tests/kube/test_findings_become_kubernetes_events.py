"""With the action enabled, findings are written as Events on their job, once per revision."""

from __future__ import annotations

import asyncio

from nats.js import JetStreamContext

from consumers.kube_events import annotate_jobs
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.kube.resources import EVENTS
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.history.test_history_stores_findings import JOB, oom, publish


async def test_oom_finding_is_written_on_the_mpijob(
    sim: SimCluster, gateway: KubeGateway, settings: Settings, topology: Topology, js: JetStreamContext
) -> None:
    stop = asyncio.Event()
    task = asyncio.create_task(annotate_jobs(js, topology, gateway, ["oom"], "replica-0", stop))
    await asyncio.sleep(0.3)  # the durable consumer exists; it starts with new findings
    other = oom(1).model_copy(update={"rule": "hang-init", "id": "another", "revision": 1})
    for finding in (oom(1), oom(1), other, oom(2, "resolved")):  # the first one redelivered
        await publish(js, topology, finding)

    def written() -> list[dict[str, object]]:
        return [
            e
            for e in gateway.list(EVENTS, JOB.namespace)[0]
            if e.get("source", {}).get("component") == "mpijob-controller"
        ]

    await until(lambda: len(written()) == 2, 10, lambda: str(written()))
    stop.set()
    await asyncio.wait_for(task, 5)

    firing, resolved = sorted(written(), key=lambda e: str(e["reason"]))
    assert firing["reason"] == "Oom" and firing["type"] == "Warning"
    assert firing["involvedObject"] == {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "name": "pi",
        "namespace": "team-a",
        "uid": JOB.uid,
    }
    assert firing["message"] == (
        "[critical] Worker 2 failed: out of memory (limit 16Gi). See docs/troubleshooting.md#oom"
    )
    assert resolved["reason"] == "OomResolved" and resolved["type"] == "Normal"


async def test_nothing_is_consumed_when_the_action_is_off(
    gateway: KubeGateway, topology: Topology, js: JetStreamContext
) -> None:
    await asyncio.wait_for(annotate_jobs(js, topology, gateway, [], "replica-0", asyncio.Event()), 1)
    assert await js.consumers_info(topology.stream("findings")) == []
