"""A watcher following the logs of running pods stops within its stop grace (what ``up`` gives a
part after SIGTERM before SIGKILL), its log-follow leases handed back and every follow it had
opened closed: as a ``watch`` process on SIGTERM (exit status 0), and in process when a follow
loses its cancellation — as Python 3.11's ``asyncio.wait_for`` (nats-py waits for every answer
with it) loses one that lands as the answer arrives, which under load kept ``up``'s watcher
following until SIGKILL. Simulated API server, real NATS."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from nats.js import JetStreamContext
from nats.js.errors import NoKeysError

from controller.bus.streams import connect
from controller.contract.settings import LogSettings, Settings, UpSettings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.metrics import PipelineMetrics
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.log_fixtures import Run, running_run
from watchers import following
from watchers.service import run_watchers_elected
from watchers.sharing import LEASE_BUCKET

RUNS = 3
GRACE_S = UpSettings().stop_grace_s


def quiet_runs(sim: SimCluster) -> list[Run]:
    """Runs of a launcher and two workers, running, each container having printed one line and
    quiet since: every follow waits in a read."""
    runs = [running_run(sim, f"train-{i}", workers=2) for i in range(RUNS)]
    for run in runs:
        for index in range(len(run.pods)):
            namespace, pod, container = run.pod(index)
            sim.set_log(namespace, pod, container, f"{pod} started\n")
    return runs


def open_follows(sim: SimCluster) -> int:
    return sum(sim.open_log_follows().values())


async def leases_held(js: JetStreamContext, topology: Topology) -> list[str]:
    """The log-follow leases held now."""
    kv = await js.key_value(topology.bucket(LEASE_BUCKET))
    try:
        return [key for key in await kv.keys() if key.startswith("lease.")]
    except NoKeysError:
        return []


@pytest.mark.slow
async def test_the_watch_process_following_running_pods_stops_on_sigterm_and_hands_its_leases_back(
    settings: Settings, sim: SimCluster, js: JetStreamContext, topology: Topology, tmp_path: Path
) -> None:
    runs = quiet_runs(sim)
    log = tmp_path / "watch.log"
    kubeconfig = str(sim.kubeconfig(tmp_path / "kubeconfig"))
    watcher = start_cli(
        ["watch"],
        cli_env(settings, tmp_path, MPIJC_KUBE__KUBECONFIG=kubeconfig, MPIJC_LOGS__FOLLOW="true"),
        tmp_path,
        log,
    )
    try:
        await until(lambda: open_follows(sim) == 3 * len(runs), 60, log.read_text)
        assert await leases_held(js, topology)
        watcher.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(watcher.wait, GRACE_S)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert rc == 0, log.read_text()
    assert open_follows(sim) == 0
    assert await leases_held(js, topology) == [], log.read_text()


async def test_a_follow_that_loses_its_cancellation_does_not_hold_the_watcher_up(
    settings: Settings,
    sim: SimCluster,
    js: JetStreamContext,
    topology: Topology,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = quiet_runs(sim)
    lost: list[str] = []
    take = following._Pump.take

    async def losing_once(pump: following._Pump, not_before: float = 0.0) -> bytes:
        """A read that, cancelled the first time, goes on as after a lost cancellation."""
        try:
            return await take(pump, not_before)
        except asyncio.CancelledError:
            if lost:
                raise
            lost.append("lost")
            return await take(pump, not_before)

    monkeypatch.setattr(following._Pump, "take", losing_once)
    watching = settings.model_copy(update={"logs": LogSettings(partitions=2, retry_s=0.05)})
    assert settings.nats.url
    nc = await connect(settings.nats.url, "tests-watchers")
    try:
        with KubeGateway.for_url(sim.url) as gateway:
            stop = asyncio.Event()
            task = asyncio.create_task(
                run_watchers_elected(watching, gateway, nc, topology, PipelineMetrics(), stop)
            )
            await until(lambda: open_follows(sim) == 3 * len(runs), 30, sim.open_log_follows)
            assert await leases_held(js, topology)
            stop.set()
            done, _ = await asyncio.wait({task}, timeout=GRACE_S)
            if not done:
                task.cancel()
            assert done, "the watcher did not stop within the stop grace"
            await task
        assert lost  # a follow did lose its cancellation
        await until(lambda: open_follows(sim) == 0, 5, sim.open_log_follows)
        assert await leases_held(js, topology) == []
    finally:
        await nc.close()
