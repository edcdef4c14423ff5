"""With the action enabled, findings are written as Events on their job, once per revision."""

from __future__ import annotations

from nats.aio.client import Client as NATS

from consumers.kube_events import attach, durable
from consumers.wiring import Wiring
from controller.bus.consuming import consuming
from controller.kube.gateway import KubeGateway
from controller.kube.resources import EVENTS
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.conftest import Stage
from tests.history.test_history_stores_findings import JOB, oom, publish


async def test_oom_finding_is_written_on_the_mpijob(
    sim: SimCluster,
    gateway: KubeGateway,
    stage: Stage,
    nats_client: NATS,
) -> None:
    await publish(
        stage.js, stage.topology, oom(1).model_copy(update={"id": "before", "rule": "oom"})
    )  # before: not written
    written_on = [durable(gateway, ["oom"], "replica-0")]
    async with consuming(nats_client, stage.topology, stage.settings.consumer, written_on, stage.metrics):
        other = oom(1).model_copy(update={"rule": "hang-init", "id": "another", "revision": 1})
        for finding in (oom(1), oom(1), other, oom(2, "resolved")):  # the first one redelivered
            await publish(stage.js, stage.topology, finding)

        def written() -> list[dict[str, object]]:
            return [
                e
                for e in gateway.list(EVENTS, JOB.namespace)[0]
                if e.get("source", {}).get("component") == "mpijob-controller"
            ]

        await until(lambda: len(written()) == 2, 10, lambda: str(written()))

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
    stage: Stage,
    nats_client: NATS,
) -> None:
    def no_gateway() -> KubeGateway:
        raise AssertionError("the role asked for Kubernetes although it has nothing to write")

    role = await attach(
        Wiring(stage.settings, stage.topology, nats_client, stage.js, None, stage.metrics, no_gateway)
    )  # type: ignore[arg-type]
    assert role.durables == () and role.background == ()
    assert await stage.js.consumers_info(stage.topology.stream("findings")) == []
