"""A watch with a stored position resumes from it at once and lists beside it: what changed
while no watcher ran comes out first, the list adds only what the watch did not already give
newer, and a position the server has compacted away lists first, as a first start does."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

from controller.contract.kubeflow import compare
from controller.contract.settings import WatcherSettings
from controller.kube.gateway import KubeGateway, ListPage
from controller.kube.resources import MPI_PODS, RawWatchEvent, Resource
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.kube_fixtures import list_requests, watch_requests, watching
from watchers.positions import WatchPositions, position_name
from watchers.watching import WatchChange, watch_resource


class HeldList:
    """The gateway, with each list page held until the test releases it: taken from the
    server ``before`` holding (an old snapshot) or after it (a fresh one)."""

    def __init__(self, gateway: KubeGateway, *, snapshot_first: bool) -> None:
        self._gateway = gateway
        self._snapshot_first = snapshot_first
        self.release = threading.Event()
        self.asked = threading.Event()

    def list_page(
        self, resource: Resource, namespace: str | None, limit: int = 0, continue_token: str | None = None
    ) -> ListPage:
        def read() -> ListPage:
            return self._gateway.list_page(resource, namespace, limit, continue_token)

        page = read() if self._snapshot_first else None
        self.asked.set()
        self.release.wait(10)
        return page or read()

    def __getattr__(self, name: str) -> object:
        return getattr(self._gateway, name)


def stored_at(version: int) -> WatchPositions:
    return WatchPositions({position_name(MPI_PODS, None): str(version)})


def compacted_past(sim: SimCluster) -> tuple[int, k.Obj]:
    """A position taken with a launcher on the cluster; then the launcher deleted, worker 0
    created and the history compacted past the position. The position and the worker."""
    job = k.mpijob("pi", workers=1)
    launcher = sim.create(k.pod(job, "launcher"))
    position = sim.resource_version
    sim.delete(launcher)
    worker = sim.create(k.pod(job, "worker", 0))
    sim.compact()
    return position, worker


def three_pods(sim: SimCluster, job: k.Obj) -> tuple[k.Obj, k.Obj, k.Obj]:
    """The launcher and workers 0 and 1 of ``job``, created on the cluster."""
    return (
        sim.create(k.pod(job, "launcher")),
        sim.create(k.pod(job, "worker", 0)),
        sim.create(k.pod(job, "worker", 1)),
    )


async def test_changes_while_down_come_first_and_the_list_adds_only_the_rest(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = k.mpijob("pi", workers=3)
    launcher, w0, w1 = three_pods(sim, job)
    position = sim.resource_version
    sim.update(k.oom_killed(w0))  # while no watcher runs
    sim.delete(w1)
    sim.create(k.pod(job, "worker", 2))

    held = HeldList(gateway, snapshot_first=False)
    async with watching(held, MPI_PODS, watcher_settings, positions=stored_at(position)) as watch:  # type: ignore[arg-type]
        await watch.recorder.wait_for_count(3)
        assert held.asked.is_set() or not list_requests(sim, "pods"), "the list waits; the watch did not"
        held.release.set()
        await watch.recorder.wait_for_count(4)
        await until(lambda: watch.sample("mpijc_watch_lists_total") == 1)

    assert watch_requests(sim, "pods")[0].query["resourceVersion"] == str(position)
    assert watch.recorder.seen() == [
        ("MODIFIED", w0["metadata"]["name"]),
        ("DELETED", w1["metadata"]["name"]),
        ("ADDED", "pi-worker-2"),
        ("ADDED", launcher["metadata"]["name"]),  # from the list: unchanged since the position
    ], "each object once, the newest first; nothing listed again that the watch gave"


async def test_an_older_list_neither_undoes_a_change_nor_brings_back_a_deletion(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = k.mpijob("pi", workers=2)
    launcher, w0, w1 = three_pods(sim, job)
    held = HeldList(gateway, snapshot_first=True)
    async with watching(held, MPI_PODS, watcher_settings, positions=stored_at(sim.resource_version)) as watch:  # type: ignore[arg-type]
        await until(held.asked.is_set)  # the list's snapshot is taken: everything below is newer
        killed = sim.update(k.oom_killed(w0))
        sim.delete(launcher)
        await watch.recorder.wait_for_count(2)
        held.release.set()
        await watch.recorder.wait_for_count(3)
        await until(lambda: watch.sample("mpijc_watch_lists_total") == 1)
        sim.update(k.with_container_state(sim.get(w1) or {}, {"running": {}}, phase="Running", ready=True))
        await watch.recorder.wait_for_count(4)

    assert watch.recorder.seen() == [
        ("MODIFIED", w0["metadata"]["name"]),
        ("DELETED", launcher["metadata"]["name"]),
        ("ADDED", w1["metadata"]["name"]),  # the only listed object the watch had not given newer
        ("MODIFIED", w1["metadata"]["name"]),
    ]
    assert (
        watch.recorder.changes[0].object["metadata"]["resourceVersion"]
        == killed["metadata"]["resourceVersion"]
    )


async def test_a_compacted_position_lists_first(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    position, worker = compacted_past(sim)
    async with watching(gateway, MPI_PODS, watcher_settings, positions=stored_at(position)) as watch:
        await watch.recorder.wait_for_count(1)
        await until(lambda: len(watch_requests(sim, "pods")) == 2)
        sim.delete(worker)
        await watch.recorder.wait_for_count(2)

    first, then = watch_requests(sim, "pods")
    assert first.query["resourceVersion"] == str(position), "tried the stored position first"
    assert int(then.query["resourceVersion"]) >= int(worker["metadata"]["resourceVersion"]), (
        "then from the list"
    )
    assert watch.recorder.seen() == [
        ("ADDED", worker["metadata"]["name"]),
        ("DELETED", worker["metadata"]["name"]),
    ]


def test_positions_not_in_the_comparable_form_are_not_resumed_from() -> None:
    assert stored_at(41).resume_from(MPI_PODS, None) == "41"
    for stored in ("", "0", "041", "abc", "12a"):
        positions = WatchPositions({position_name(MPI_PODS, None): stored})
        assert positions.resume_from(MPI_PODS, None) is None, stored
    assert position_name(MPI_PODS, None) != position_name(MPI_PODS, "team-a")


def test_resource_versions_compare_as_integers_of_any_length() -> None:
    assert (compare("9", "10"), compare("10", "10"), compare("100000000000000000001", "99")) == (-1, 0, 1)
    assert compare("010", "10") is None and compare("a", "1") is None and compare(None, "1") is None


class HeldStream:
    """A watch stream whose first event waits (in the reading thread) until ``until`` is set."""

    def __init__(self, stream: Any, until: threading.Event) -> None:
        self._stream, self._until = stream, until

    def __iter__(self) -> Iterator[RawWatchEvent]:
        self._until.wait(10)
        yield from self._stream

    def __next__(self) -> RawWatchEvent:
        return next(iter(self))

    def close(self) -> None:
        self._stream.close()


class WatchAfterMerge:
    """The gateway, with the answer to each watch held until the list beside is merged."""

    def __init__(self, gateway: KubeGateway, merged: threading.Event) -> None:
        self._gateway, self._merged = gateway, merged

    def list_page(
        self, resource: Resource, namespace: str | None, limit: int = 0, continue_token: str | None = None
    ) -> ListPage:
        return self._gateway.list_page(resource, namespace, limit, continue_token)

    def watch(
        self, resource: Resource, namespace: str | None, resource_version: str, timeout_s: float
    ) -> HeldStream:
        return HeldStream(self._gateway.watch(resource, namespace, resource_version, timeout_s), self._merged)


async def test_a_position_refused_after_the_list_beside_is_merged_still_compares_with_what_was_published(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    """The deletions made while down are then the comparison's to tell: ``listed`` hears the
    uids of the list that follows, never that the (refused) watch would tell them."""
    position, worker = compacted_past(sim)
    told: list[frozenset[str] | None] = []
    handed: list[tuple[str, str]] = []
    merged = threading.Event()

    async def listed(resource: Resource, namespace: str | None, uids: frozenset[str] | None) -> None:
        told.append(uids)

    async def sink(change: WatchChange) -> None:
        handed.append((change.type, change.object["metadata"]["name"]))
        merged.set()  # the list beside handed the worker on: now the watch may answer 410

    stop = asyncio.Event()
    task = asyncio.create_task(
        watch_resource(
            WatchAfterMerge(gateway, merged),  # type: ignore[arg-type]
            MPI_PODS,
            None,
            sink,
            watcher_settings,
            stop,
            listed=listed,
            positions=stored_at(position),
        )
    )
    await until(lambda: len(told) == 1, what=lambda: (told, handed))
    stop.set()
    await asyncio.wait_for(task, 2.0)

    assert told == [frozenset({worker["metadata"]["uid"]})]
    assert handed == [("ADDED", worker["metadata"]["name"])], "listed twice, handed on once"
