"""Lists come in pages (``limit``/``continue``).

On a cluster of 17,000 pods one list answer is tens of megabytes. The watch loop lists in
pages of ``list_page_size`` as client-go's pager does; every page belongs to the first one's
consistent snapshot, so the watch starts from that resourceVersion and a change made during
the list arrives through it. A ``continue``
token that expired midway (its snapshot compacted away: 410) starts the list again, and
nothing listed before comes out twice.
"""

from __future__ import annotations

import pytest

from controller.contract.settings import WatcherSettings
from controller.kube.errors import APIGoneError
from controller.kube.gateway import KubeGateway
from controller.kube.resources import MPI_PODS
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.kube_fixtures import list_requests, watching


def _pods(sim: SimCluster, count: int) -> list[k.Obj]:
    job = sim.create(k.mpijob("pi", workers=count))
    return [sim.create(k.pod(job, "worker", i)) for i in range(count)]


def test_pages_belong_to_the_first_ones_snapshot(sim: SimCluster, gateway: KubeGateway) -> None:
    pods = _pods(sim, 5)
    first = gateway.list_page(MPI_PODS, None, limit=2)
    sim.update(k.with_container_state(pods[4], {"running": {}}, phase="Running", ready=True))
    sim.delete(pods[3])
    second = gateway.list_page(MPI_PODS, None, limit=2, continue_token=first.continue_token)
    third = gateway.list_page(MPI_PODS, None, limit=2, continue_token=second.continue_token)

    listed = first.items + second.items + third.items
    assert [p["metadata"]["name"] for p in listed] == [f"pi-worker-{i}" for i in range(5)]
    assert listed[4]["metadata"]["resourceVersion"] == pods[4]["metadata"]["resourceVersion"]
    assert first.resource_version == second.resource_version == third.resource_version
    assert third.continue_token is None
    assert (listed[0]["apiVersion"], listed[0]["kind"]) == ("v1", "Pod")


def test_a_continue_token_older_than_the_compacted_history_has_expired(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    pods = _pods(sim, 3)
    first = gateway.list_page(MPI_PODS, None, limit=2)
    sim.update(k.with_container_state(pods[0], {"running": {}}, phase="Running", ready=True))
    sim.compact()

    with pytest.raises(APIGoneError) as gone:
        gateway.list_page(MPI_PODS, None, limit=2, continue_token=first.continue_token)
    assert gone.value.reason == "Expired"


async def test_every_object_of_every_page_comes_out_once_then_the_watch_follows(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    pods = _pods(sim, 7)
    settings = WatcherSettings(watch_timeout_s=60, list_page_size=3, backoff_initial_s=0.02)
    async with watching(gateway, MPI_PODS, settings) as watch:
        await watch.recorder.wait_for_count(7)
        sim.update(k.with_container_state(pods[6], {"running": {}}, phase="Running", ready=True))
        await watch.recorder.wait_for_count(8)

    assert watch.recorder.seen() == [("ADDED", f"pi-worker-{i}") for i in range(7)] + [
        ("MODIFIED", "pi-worker-6")
    ]
    listings = list_requests(sim, "pods")
    assert [r.query.get("limit") for r in listings] == ["3", "3", "3"]
    assert ["continue" in r.query for r in listings] == [False, True, True]
    assert watch.sample("mpijc_watch_lists_total") == 1


async def test_a_list_whose_token_expired_starts_again_and_repeats_nothing(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    _pods(sim, 7)
    sim.fail_next(1, 410, match="continue=")
    settings = WatcherSettings(watch_timeout_s=60, list_page_size=3, backoff_initial_s=0.02)
    async with watching(gateway, MPI_PODS, settings) as watch:
        await watch.recorder.wait_for_count(7)
        await watch.recorder.wait_for(lambda _: len(list_requests(sim, "pods")) == 5)

    assert watch.recorder.seen() == [("ADDED", f"pi-worker-{i}") for i in range(7)]
    assert ["continue" in r.query for r in list_requests(sim, "pods")] == [False, True, False, True, True]
    assert watch.sample("mpijc_watch_errors_total", error="APIGoneError") == 0
