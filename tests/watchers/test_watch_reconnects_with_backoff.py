"""Connection errors and 5xx answers reconnect with exponential backoff and jitter, resumed, not relisted."""

from __future__ import annotations

import asyncio
import time

import pytest

from controller.contract.backoff import Backoff
from controller.contract.settings import WatcherSettings
from controller.kube.gateway import NO_RETRIES, KubeGateway
from controller.kube.resources import MPI_PODS, MPIJOBS
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.kube_fixtures import launched, list_requests, watch_requests, watches_open, watching


@pytest.mark.parametrize(
    ("rng", "expected"),
    [
        (0.0, [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]),
        (1.0, [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]),
    ],
    ids=["lowest-jitter", "highest-jitter"],
)
def test_backoff_doubles_up_to_the_cap_with_jitter_within_half_to_full(
    rng: float, expected: list[float]
) -> None:
    backoff = Backoff(initial_s=0.1, max_s=1.0, rng=lambda: rng)
    assert [round(backoff.next_delay(), 6) for _ in expected] == expected
    backoff.reset()
    assert backoff.next_delay() == pytest.approx(expected[0])


async def test_failing_lists_are_retried_with_growing_delays_until_the_server_recovers(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    settings = WatcherSettings(watch_timeout_s=60, backoff_initial_s=0.04, backoff_max_s=1.0)
    sim.create(k.mpijob("pi"))
    sim.fail_next(3, 503)
    started = time.monotonic()
    async with watching(gateway, MPIJOBS, settings, rng=lambda: 0.0) as watch:
        await watch.recorder.wait_for_count(1)
        elapsed = time.monotonic() - started

    assert elapsed >= 0.02 + 0.04 + 0.08, "three waits of base/2 with the lowest jitter"
    assert watch.recorder.seen() == [("ADDED", "pi")]
    assert watch.sample("mpijc_watch_errors_total", error="APIUnavailableError") == 3
    assert len(list_requests(sim, "mpijobs")) == 4


async def test_a_cut_connection_resumes_from_the_last_version_without_relisting_or_repeating(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = launched(sim, workers=2)
    async with watching(gateway, MPI_PODS, watcher_settings) as watch:
        await until(lambda: len(watch_requests(sim, "pods")) == 1)
        worker = sim.create(k.pod(job, "worker", 0))
        await watch.recorder.wait_for_count(2)
        sim.fail_next(2, 500, match="watch=true")
        sim.drop_watches(abrupt=True)
        await until(lambda: len(watch_requests(sim, "pods")) == 4)  # cut, 500, 500, then connected
        sim.create(k.pod(job, "worker", 1))
        await watch.recorder.wait_for_count(3)

    assert watch.recorder.seen() == [
        ("ADDED", "pi-launcher-x7k2p"),
        ("ADDED", "pi-worker-0"),
        ("ADDED", "pi-worker-1"),
    ]
    assert len(list_requests(sim, "pods")) == 1
    assert watch_requests(sim, "pods")[-1].query["resourceVersion"] == worker["metadata"]["resourceVersion"]
    assert watch.sample("mpijc_watch_errors_total", error="APIUnavailableError") == 3


async def test_a_cleanly_ended_stream_reconnects_at_once(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    async with watching(gateway, MPIJOBS, watcher_settings) as watch:
        await watches_open(sim)
        sim.drop_watches(abrupt=False)
        await until(lambda: len(watch_requests(sim, "mpijobs")) == 2)
        sim.create(k.mpijob("pi"))
        await watch.recorder.wait_for_count(1)

    assert watch.sample("mpijc_watch_errors_total", error="APIUnavailableError") == 0


async def test_stop_interrupts_a_backoff_wait(sim: SimCluster, gateway: KubeGateway) -> None:
    settings = WatcherSettings(watch_timeout_s=60, backoff_initial_s=30, backoff_max_s=60)
    sim.fail_next(1, 503)
    async with watching(gateway, MPIJOBS, settings) as watch:
        await until(lambda: watch.sample("mpijc_watch_errors_total", error="APIUnavailableError") == 1)
        started = time.monotonic()
        watch.stop.set()
        await asyncio.wait_for(watch.task, timeout=1.0)
    assert time.monotonic() - started < 0.5


async def test_an_unreachable_server_is_retried_not_fatal(watcher_settings: WatcherSettings) -> None:
    with SimCluster() as gone:
        url = gone.url
    with KubeGateway.for_url(url, retries=NO_RETRIES) as unreachable:
        async with watching(unreachable, MPIJOBS, watcher_settings) as watch:
            await until(lambda: watch.sample("mpijc_watch_errors_total", error="APIUnavailableError") >= 2)
            assert not watch.task.done()
