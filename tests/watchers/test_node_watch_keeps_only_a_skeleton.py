"""The node watch lists and watches Nodes cluster-wide through the Kubernetes door, against the
simulated API server: each Node arrives whole (its conditions), a node deleted while the watch
was cut comes out as a synthetic DELETED after the relist — and what the loop keeps of each node
between its changes is its name, uid and version only, however heavy the Node."""

from __future__ import annotations

from controller.contract.settings import WatcherSettings
from controller.kube.gateway import KubeGateway
from controller.kube.resources import NODES
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.kube_fixtures import watching
from watchers.nodes import conditions_of, skeleton

DEADLOCK = ("KernelDeadlock", "True", "KernelHasDeadlock", "task blocked", "2026-11-20T10:05:00Z")


async def test_nodes_are_watched_and_a_deleted_one_is_told_by_its_name_after_a_relist(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    sim.create(k.node("gpu-0"))
    doomed = sim.create(k.node("gpu-1"))
    async with watching(gateway, NODES, watcher_settings) as watch:
        await watch.recorder.wait_for_count(2)
        sim.update(k.node("gpu-0", DEADLOCK))
        await watch.recorder.wait_for_count(3)
        changed = watch.recorder.changes[-1].object
        assert conditions_of(changed)["KernelDeadlock"].status == "True"

        sim.fail_next(10_000, 503, match="watch=true")
        sim.drop_watches()
        sim.delete(doomed)
        sim.compact()
        sim.clear_failures()
        await watch.recorder.wait_for_count(4)

    assert watch.recorder.seen()[-1] == ("DELETED", "gpu-1")
    assert watch.recorder.changes[-1].object == skeleton(doomed)  # what was kept: no status, no images


def test_a_nodes_skeleton_is_its_identity_only() -> None:
    node = k.node("gpu-0", DEADLOCK)
    kept = skeleton(node)
    assert kept["metadata"] == {key: node["metadata"][key] for key in ("name", "uid", "resourceVersion")}
    assert "status" not in kept and "spec" not in kept
