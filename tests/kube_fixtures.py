"""Fixtures and helpers for tests against the simulated Kubernetes API server.

``sim`` is a fresh :class:`~controller.testing.simcluster.SimCluster` per test (real HTTP on a free
loopback port), ``gateway`` the real :class:`~controller.kube.gateway.KubeGateway` pointed at it
(without retries), and
:func:`watching` runs one :func:`~watchers.watching.watch_resource` loop into a
:class:`Recorder` for the duration of a ``async with``. Objects come from
:mod:`controller.testing.objects`, in their real shapes. Load with ``pytest_plugins``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from controller.contract.settings import WatcherSettings
from controller.kube.gateway import NO_RETRIES, KubeGateway
from controller.kube.resources import Resource
from controller.testing import objects as k
from controller.testing.simcluster import RawObject, RecordedRequest, SimCluster
from controller.testing.waits import until
from watchers.metrics import WatchMetrics
from watchers.positions import WatchPositions
from watchers.watching import WatchChange, watch_resource

BOOKMARK_INTERVAL_S = 0.1
"""How often the simulated server sends bookmarks: fast, so tests need not wait for them."""


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(bookmark_interval_s=BOOKMARK_INTERVAL_S) as cluster:
        yield cluster


@pytest.fixture
def gateway(sim: SimCluster) -> Iterator[KubeGateway]:
    """Answers every failure at once (:data:`NO_RETRIES`): what the tests of a caller's own recovery
    (the watch loop, the elector) inject must reach the caller, not be absorbed by the gateway."""
    with KubeGateway.for_url(sim.url, retries=NO_RETRIES) as kube:
        yield kube


@pytest.fixture
def watcher_settings() -> WatcherSettings:
    """Long watches (tests that need a server timeout set their own), quick reconnects."""
    return WatcherSettings(watch_timeout_s=60, backoff_initial_s=0.02, backoff_max_s=0.1)


@dataclass
class Recorder:
    """A sink that keeps every change it is given."""

    changes: list[WatchChange] = field(default_factory=list)

    async def __call__(self, change: WatchChange) -> None:
        self.changes.append(change)

    def seen(self) -> list[tuple[str, str]]:
        """(type, object name) of every change, in order."""
        return [(c.type, c.object.get("metadata", {}).get("name", "?")) for c in self.changes]

    async def wait_for(self, predicate: Callable[[list[WatchChange]], bool], timeout_s: float = 5.0) -> None:
        """Wait until ``predicate(changes)`` holds; fail the test with what was seen otherwise."""
        await until(lambda: predicate(self.changes), timeout_s, lambda: f"saw {self.seen()}")

    async def wait_for_count(self, count: int, timeout_s: float = 5.0) -> None:
        await self.wait_for(lambda changes: len(changes) >= count, timeout_s)


async def watches_open(sim: SimCluster, count: int = 1, timeout_s: float = 5.0) -> None:
    """Wait until ``count`` watch streams are being served (not just requested)."""
    await until(lambda: sum(sim.open_watches().values()) == count, timeout_s, lambda: f"{sim.open_watches()}")


@dataclass
class RunningWatch:
    """One running watch loop, its sink and metrics."""

    resource: Resource
    recorder: Recorder
    metrics: WatchMetrics
    stop: asyncio.Event
    task: asyncio.Task[None]

    def sample(self, name: str, **labels: str) -> float:
        return self.metrics.sample(name, resource=str(self.resource), **labels)


@contextlib.asynccontextmanager
async def watching(
    gateway: KubeGateway,
    resource: Resource,
    settings: WatcherSettings,
    *,
    namespace: str | None = None,
    rng: Callable[[], float] = lambda: 0.5,
    positions: WatchPositions | None = None,
) -> AsyncIterator[RunningWatch]:
    """Run ``watch_resource`` for the body of the ``async with``; stop it (promptly) afterwards."""
    recorder, metrics, stop = Recorder(), WatchMetrics(), asyncio.Event()
    task = asyncio.create_task(
        watch_resource(
            gateway,
            resource,
            namespace,
            recorder,
            settings,
            stop,
            metrics=metrics,
            rng=rng,
            positions=positions,
        )
    )
    try:
        yield RunningWatch(resource, recorder, metrics, stop, task)
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout=2.0)


def watch_requests(sim: SimCluster, plural: str) -> list[RecordedRequest]:
    """The watch requests the server received for ``plural``, in order."""
    return [r for r in sim.requests if r.path.endswith(f"/{plural}") and r.query.get("watch") == "true"]


def list_requests(sim: SimCluster, plural: str) -> list[RecordedRequest]:
    """The list requests the server received for ``plural``, in order."""
    return [
        r
        for r in sim.requests
        if r.method == "GET" and r.path.endswith(f"/{plural}") and "watch" not in r.query
    ]


class FakeClock:
    """A settable clock for the leader elector: time moves only when the test says so."""

    def __init__(self, start: datetime = datetime(2026, 11, 23, 6, 41, 57, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def launched(sim: SimCluster, workers: int) -> RawObject:
    """An MPIJob ``pi`` of ``workers`` workers and its launcher pod, created in ``sim``: the job as stored."""
    job = sim.create(k.mpijob("pi", workers=workers))
    sim.create(k.pod(job, "launcher"))
    return job
