"""The whole controller under one test: the simulated cluster, the watchers and the consumers on
the test's NATS and PostgreSQL (:func:`controller_running`), started through one fixture,
:func:`end_to_end`, whose :meth:`EndToEnd.start_run` puts a running MPIJob and its pods in the
cluster; and :func:`wait_for_sql`, which waits for the history to show what the test expects."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from nats.js import JetStreamContext
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.service import run_consumers
from controller.bus.streams import connect
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import DEFAULT_RETRIES, KubeGateway, RetryPolicy
from controller.kube.resources import WATCHED
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.conftest import Stage
from tests.kube_fixtures import watches_open
from watchers.service import run_watchers_elected

Obj = dict[str, Any]


@contextlib.asynccontextmanager
async def consumers_running(
    settings: Settings, topology: Topology, engine: AsyncEngine, metrics: PipelineMetrics
) -> AsyncIterator[None]:
    """Every consumer (history, rules, notify, audit) as their process runs them, once started."""
    stop, started = asyncio.Event(), asyncio.Event()
    assert settings.nats.url
    task = asyncio.create_task(
        run_consumers(settings.nats.url, topology, settings, engine, metrics, stop, started)
    )
    await asyncio.wait_for(started.wait(), 10)
    try:
        yield
    finally:
        stop.set()
        await task


@contextlib.asynccontextmanager
async def watchers_running(
    settings: Settings,
    sim: SimCluster,
    js: JetStreamContext,
    topology: Topology,
    metrics: PipelineMetrics,
    retries: RetryPolicy = DEFAULT_RETRIES,
) -> AsyncIterator[None]:
    """The watchers (and the log followers beside them), on a connection of their own as in their
    process."""
    assert settings.nats.url
    stop, nc = asyncio.Event(), await connect(settings.nats.url, "tests-watchers")
    with KubeGateway.for_url(sim.url, retries=retries) as gateway:
        task = asyncio.create_task(run_watchers_elected(settings, gateway, nc, topology, metrics, stop))
        try:
            yield
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
            await nc.drain()


@contextlib.asynccontextmanager
async def controller_running(
    settings: Settings,
    sim: SimCluster,
    js: JetStreamContext,
    topology: Topology,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> AsyncIterator[None]:
    """The consumers and the watchers, once every watch the simulated cluster serves is open."""
    async with (
        consumers_running(settings, topology, engine, metrics),
        watchers_running(settings, sim, js, topology, metrics),
    ):
        await watches_open(sim, len(WATCHED), timeout_s=30)
        yield


async def scalar(engine: AsyncEngine, sql: str) -> object:
    """The one value ``sql`` selects."""
    async with engine.connect() as conn:
        return (await conn.execute(text(sql))).scalar()


async def wait_for_sql(engine: AsyncEngine, sql: str, expected: object, timeout_s: float = 15) -> None:
    """Wait until ``sql`` selects ``expected``; fail with what it selected last."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while (got := await scalar(engine, sql)) != expected:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{sql!r} gave {got!r}, expected {expected!r}")
        await asyncio.sleep(0.05)


@dataclass
class EndToEnd(Stage):
    """The simulated cluster and what the controller of one test runs on."""

    sim: SimCluster

    def running(self, settings: Settings | None = None) -> contextlib.AbstractAsyncContextManager[None]:
        """Watchers and consumers running (with ``settings`` where the test changed them)."""
        return controller_running(
            settings or self.settings, self.sim, self.js, self.topology, self.engine, self.metrics
        )

    def start_run(self, name: str, workers: int, *, launcher: bool = True) -> Obj:
        """An MPIJob of ``workers`` one-GPU workers, Running, its pods (the launcher on ``cpu-1``
        where it has one, worker ``i`` on ``gpu-i``) created and running; the job."""
        job = k.mpijob(name, workers=workers, gpus=1)
        self.sim.create(job)
        self.sim.update(k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z")))
        pods = [k.pod(job, "launcher", node="cpu-1")] if launcher else []
        for pod in pods + [k.pod(job, "worker", i, node=f"gpu-{i}") for i in range(workers)]:
            self.sim.create(pod)
            self.sim.update(k.with_container_state(pod, {"running": {}}, phase="Running", ready=True))
        return job

    def pods_started(self, job: Obj, pods: list[Obj], reason: str) -> None:
        """``pods`` created, then ``job`` Running (``reason``) and each pod running, at 10:01."""
        for pod in pods:
            self.sim.create(pod)
        self.sim.update(k.with_conditions(self.sim.get(job), ("Running", reason, "2026-11-20T10:01:00Z")))
        running = {"running": {"startedAt": "2026-11-20T10:01:00Z"}}
        for pod in pods:
            self.sim.update(k.with_container_state(self.sim.get(pod), running, phase="Running", ready=True))

    async def until_sql(self, sql: str, expected: object, timeout_s: float = 15) -> None:
        """Wait until ``sql`` selects ``expected`` from this test's history."""
        await wait_for_sql(self.engine, sql, expected, timeout_s)


@pytest.fixture
def end_to_end(sim: SimCluster, stage: Stage) -> EndToEnd:
    """This test's cluster, streams, database and metrics, for the controller to run on."""
    return EndToEnd(stage.settings, stage.topology, stage.js, stage.engine, stage.metrics, sim)
