"""410 Gone makes the loop relist; what vanished while it could not watch comes out as a synthetic DELETED."""

from __future__ import annotations

from controller.contract.settings import WatcherSettings
from controller.kube.gateway import KubeGateway
from controller.kube.resources import MPI_PODS
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.kube_fixtures import launched, list_requests, watch_requests, watches_open, watching


async def test_objects_deleted_while_disconnected_come_out_as_deleted_with_their_last_state(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = sim.create(k.mpijob("pi", workers=3))
    launcher, w0, w1, w2 = (
        sim.create(p) for p in [k.pod(job, "launcher")] + [k.pod(job, "worker", i) for i in range(3)]
    )
    async with watching(gateway, MPI_PODS, watcher_settings) as watch:
        await watch.recorder.wait_for_count(4)
        running = sim.update(k.with_container_state(w1, {"running": {}}, phase="Running", ready=True))
        await watch.recorder.wait_for_count(5)

        # Cut the watch and keep it from reconnecting while the cluster moves on and compacts.
        sim.fail_next(10_000, 503, match="watch=true")
        sim.drop_watches()
        sim.delete(w1)  # known as Running: the synthetic DELETED must carry that state
        sim.delete(launcher)
        sim.update(k.with_container_state(w2, {"running": {}}, phase="Running", ready=True))
        w3 = sim.create(k.pod(job, "worker", 3))
        sim.compact()
        sim.clear_failures()
        await watch.recorder.wait_for_count(9)

    assert watch.recorder.seen()[5:] == [
        ("DELETED", "pi-launcher-x7k2p"),
        ("DELETED", "pi-worker-1"),
        ("MODIFIED", "pi-worker-2"),
        ("ADDED", "pi-worker-3"),
    ]
    deleted = {c.object["metadata"]["name"]: c.object for c in watch.recorder.changes if c.type == "DELETED"}
    assert deleted["pi-worker-1"] == running, "the last state known before the disconnect"
    assert deleted["pi-worker-1"]["status"]["phase"] == "Running"
    assert ("MODIFIED", "pi-worker-0") not in watch.recorder.seen(), "unchanged objects are not repeated"
    assert watch.recorder.changes[-1].object["metadata"]["uid"] == w3["metadata"]["uid"]
    assert len(list_requests(sim, "pods")) == 2
    assert watch.sample("mpijc_watch_relists_total") == 1
    assert watch.sample("mpijc_watch_known_objects") == 3
    assert [c.object["metadata"]["uid"] for c in watch.recorder.changes].count(w0["metadata"]["uid"]) == 1


async def test_a_410_answer_to_a_watch_request_relists_once(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = launched(sim, workers=1)
    async with watching(gateway, MPI_PODS, watcher_settings) as watch:
        await watches_open(sim)
        # The stream ends; the next watch request is answered 410 at the HTTP level (etcd, not the cache).
        sim.fail_next(1, 410, match="watch=true")
        sim.drop_watches(abrupt=False)
        await until(lambda: len(list_requests(sim, "pods")) == 2)
        worker = sim.create(k.pod(job, "worker", 0))
        await watch.recorder.wait_for_count(2)

    assert watch.recorder.seen() == [("ADDED", "pi-launcher-x7k2p"), ("ADDED", "pi-worker-0")]
    assert watch.recorder.changes[-1].object["metadata"]["uid"] == worker["metadata"]["uid"]
    assert watch.sample("mpijc_watch_relists_total") == 1
    assert len(watch_requests(sim, "pods")) == 3


async def test_a_410_error_event_in_the_stream_relists(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = sim.create(k.mpijob("pi", workers=1))
    async with watching(gateway, MPI_PODS, watcher_settings) as watch:
        await until(lambda: len(watch_requests(sim, "pods")) == 1)
        sim.inject(
            MPI_PODS,
            {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "too old resource version: 1 (2)",
                    "reason": "Expired",
                    "code": 410,
                },
            },
        )
        await until(lambda: len(list_requests(sim, "pods")) == 2)
        sim.create(k.pod(job, "launcher"))
        await watch.recorder.wait_for_count(1)

    assert watch.recorder.seen() == [("ADDED", "pi-launcher-x7k2p")]
    assert watch.sample("mpijc_watch_relists_total") == 1
