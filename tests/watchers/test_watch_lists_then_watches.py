"""The watch loop lists first (everything there comes out as ADDED), then watches from the list's version."""

from __future__ import annotations

import asyncio
import contextlib
import time

from controller.contract.settings import WatcherSettings
from controller.kube.gateway import KubeGateway
from controller.kube.resources import EVENTS, JOBSET_PODS, MPI_PODS, MPIJOBS, NODES, WATCHED
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.kube_fixtures import list_requests, watch_requests, watches_open, watching


def jobset_pod(name: str, namespace: str = "team-b") -> k.Obj:
    """A pod of a Kubeflow Trainer v2 TrainJob (run by JobSet): no mpi-operator labels."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "llama",
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "batch.kubernetes.io/job-completion-index": "0",
                "trainer.kubeflow.org/trainjob-name": "llama",
            },
        },
        "spec": {"containers": [{"name": "node", "image": "img"}]},
        "status": {"phase": "Pending"},
    }


async def test_existing_objects_come_out_as_added_then_changes_stream(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = k.mpijob("pi", workers=2)
    launcher, worker0, worker1 = k.pod(job, "launcher"), k.pod(job, "worker", 0), k.pod(job, "worker", 1)
    for obj in (job, launcher, worker0):
        sim.create(obj)
    sim.create(jobset_pod("llama-node-0-0"))  # another operator's pod: not selected

    async with watching(gateway, MPI_PODS, watcher_settings) as watch:
        await watch.recorder.wait_for_count(2)
        sim.create(worker1)
        running = k.with_container_state(sim.get(worker0) or {}, {"running": {}}, phase="Running", ready=True)
        sim.update(running)
        sim.delete(launcher)
        await watch.recorder.wait_for_count(5)

    assert watch.recorder.seen() == [
        ("ADDED", "pi-launcher-x7k2p"),
        ("ADDED", "pi-worker-0"),
        ("ADDED", "pi-worker-1"),
        ("MODIFIED", "pi-worker-0"),
        ("DELETED", "pi-launcher-x7k2p"),
    ]
    assert all(c.resource == MPI_PODS for c in watch.recorder.changes)
    assert watch.recorder.changes[3].object["status"]["phase"] == "Running"
    listed = watch.recorder.changes[0].object
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "Pod"), "listed items look like watched ones"
    assert watch.sample("mpijc_watch_events_total", type="ADDED") == 3
    assert watch.sample("mpijc_watch_lists_total") == 1


async def test_watch_starts_at_the_list_resource_version_with_bookmarks_and_selector(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    sim.create(k.mpijob("pi"))
    listed_at = sim.resource_version
    async with watching(gateway, MPI_PODS, watcher_settings, namespace="team-a") as watch:
        await until(lambda: len(watch_requests(sim, "pods")) == 1)
        sim.create(k.pod(k.mpijob("pi"), "launcher"))
        await watch.recorder.wait_for_count(1)

    [listing] = list_requests(sim, "pods")
    [request] = watch_requests(sim, "pods")
    assert listing.path == request.path == "/api/v1/namespaces/team-a/pods"
    assert listing.query == {"labelSelector": "training.kubeflow.org/job-name", "limit": "500"}
    assert request.query["resourceVersion"] == str(listed_at)
    assert request.query["allowWatchBookmarks"] == "true"
    assert request.query["labelSelector"] == "training.kubeflow.org/job-name"
    assert request.query["timeoutSeconds"] == str(watcher_settings.watch_timeout_s)


async def test_a_watch_ended_by_its_timeout_resumes_without_relisting(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    settings = WatcherSettings(watch_timeout_s=1, backoff_initial_s=0.02, backoff_max_s=0.1)
    job = sim.create(k.mpijob("pi"))
    async with watching(gateway, MPIJOBS, settings) as watch:
        await until(lambda: len(watch_requests(sim, "mpijobs")) >= 2, timeout_s=5)
        sim.update(k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-20T10:00:21Z")))
        await watch.recorder.wait_for_count(2)

    assert watch.recorder.seen() == [("ADDED", "pi"), ("MODIFIED", "pi")]
    assert len(list_requests(sim, "mpijobs")) == 1
    first, second = watch_requests(sim, "mpijobs")[:2]
    assert int(second.query["resourceVersion"]) >= int(first.query["resourceVersion"])
    assert watch.sample("mpijc_watch_errors_total", error="APIUnavailableError") == 0


async def test_one_watch_connection_per_resource_kind_whatever_the_number_of_jobs(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    for n in range(20):
        job = sim.create(k.mpijob(f"job-{n}", namespace=f"team-{n % 3}", workers=4))
        for obj in [k.pod(job, "launcher")] + [k.pod(job, "worker", i) for i in range(4)]:
            sim.create(obj)
    async with contextlib.AsyncExitStack() as stack:
        watches = [await stack.enter_async_context(watching(gateway, r, watcher_settings)) for r in WATCHED]
        await watches_open(sim, len(WATCHED))
        await until(lambda: sum(len(w.recorder.changes) for w in watches) == 20 + 100)
        opened = sim.open_watches()

    assert opened == {str(resource): 1 for resource in WATCHED}
    jobs = {f"{plural}.kubeflow.org" for plural in ("mpijobs", "pytorchjobs", "tfjobs", "xgboostjobs")}
    jobs |= {"paddlejobs.kubeflow.org", "jaxjobs.kubeflow.org", "trainjobs.trainer.kubeflow.org"}
    assert set(opened) == jobs | {str(r) for r in (MPI_PODS, JOBSET_PODS, EVENTS, NODES)}


async def test_stop_ends_the_loop_promptly_and_closes_its_connection(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    async with watching(gateway, MPIJOBS, watcher_settings) as watch:
        await watches_open(sim)
        started = time.monotonic()
        watch.stop.set()
        await asyncio.wait_for(watch.task, timeout=1.0)
        assert time.monotonic() - started < 0.5
    await watches_open(sim, 0, timeout_s=2)
