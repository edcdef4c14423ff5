"""Runs whose pods write logs on the simulated API server, a follower running over them, and what
it stored on ``LOGS``, for the log tests."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx
import pytest
from fastapi import FastAPI
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.logs import DEFAULT_SEARCH, RunLogs, SearchLimits
from controller.bus.logstore import parsed_batches, read_raw
from controller.contract.events import Change, JobRef
from controller.contract.logs import LogBatch, LogLine, LogPosition
from controller.contract.settings import LogSettings, NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import running_until_exit
from tests.api_fixtures import T0, USERS, insert_runs, run_row
from tests.conftest import Stage
from watchers.following import LogFollower
from watchers.metrics import WatchMetrics
from watchers.normalizing import normalize_pod

S = 1_000_000_000
BASE = int(T0.timestamp()) * S


def logs_api(stage: Stage, search: SearchLimits = DEFAULT_SEARCH) -> FastAPI:
    """The API over ``stage``'s store and logs stream, read by ``USERS``, its metrics never cached."""
    return create_app(
        stage.engine,
        PipelineMetrics(),
        StaticAccess(USERS),
        metrics_ttl_s=0,
        run_logs=RunLogs(stage.js, stage.topology),
        search=search,
    )


def in_process(app: FastAPI) -> httpx.AsyncClient:
    """A client of ``app`` served in this process."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


def log_batch(uid: str, pod: str, role: str, lines: list[tuple[float, int | None, str]]) -> LogBatch:
    """Lines (seconds after T0, rank, text) of one pod's container ``main``."""
    logged = tuple(LogLine(ts=BASE + int(at * S), rank=rank, text=text) for at, rank, text in lines)
    end = LogPosition(ts=logged[-1].ts, ties=1, stored_bytes=sum(len(x.text) for x in logged))
    return LogBatch(
        run_uid=uid,
        namespace="team-a",
        job="llm",
        pod=pod,
        container="main",
        role=role,  # type: ignore[arg-type]
        index=None if role == "launcher" else int(pod[-1]),
        lines=logged,
        position=end,
    )


async def run_with_logs(stage: Stage) -> str:
    """A run of team-a whose launcher and two workers wrote lines, stored pod by pod (worker 1's
    clock half a second behind: its lines carry earlier stamps)."""
    uid = str(uuid.uuid4())
    await insert_runs(stage.engine, [run_row("team-a", "llm", T0, uid=uid, phase="Running")])
    launcher = [(1.0, 0, "[1,0]<stdout>:step 1 loss 2.0"), (3.0, 1, "[1,1]<stdout>:step 2 NCCL WARN retry")]
    worker0 = [(2.0, None, "sshd: accepted"), (3.0, None, "orted started")]
    worker1 = [(0.5, None, "sshd: accepted"), (2.5, None, "CUDA error: an illegal memory access")]
    stored = [
        log_batch(uid, "llm-launcher", "launcher", launcher),
        log_batch(uid, "llm-worker-0", "worker", worker0),
        log_batch(uid, "llm-worker-1", "worker", worker1),  # stored last, written among the first
    ]
    await stage.publish_logs(stored)
    return uid


RUNNING = {"running": {"startedAt": "2026-11-20T10:01:00Z"}}


@dataclass
class Run:
    """A running MPIJob on the simulated cluster: its ref and its pods (launcher first)."""

    job: JobRef
    pods: list[k.Obj] = field(default_factory=list)

    def pod(self, index: int) -> tuple[str, str, str]:
        """(namespace, pod name, container) of pod ``index`` (0: the launcher)."""
        meta = self.pods[index]["metadata"]
        return meta["namespace"], meta["name"], self.pods[index]["spec"]["containers"][0]["name"]


def running_run(
    sim: SimCluster, name: str, workers: int = 1, *, created: str = "2026-11-20T10:00:02Z"
) -> Run:
    """An MPIJob ``name`` whose launcher and workers run (logs empty)."""
    job = k.mpijob(name, workers=workers)
    sim.create(job)
    meta = job["metadata"]
    run = Run(JobRef(uid=meta["uid"], kind="MPIJob", namespace=meta["namespace"], name=meta["name"]))
    for role, index in [("launcher", None), *(("worker", i) for i in range(workers))]:
        pod = k.with_container_state(
            k.pod(job, role, index, created=created), RUNNING, phase="Running", ready=True
        )
        sim.create(pod)
        run.pods.append(pod)
    return run


class Following:
    """A follower over the simulated cluster, told of every pod of the given runs."""

    def __init__(
        self, follower: LogFollower, jobs: dict[tuple[str, str], JobRef], metrics: WatchMetrics
    ) -> None:
        self.follower = follower
        self.jobs = jobs
        self.metrics = metrics

    def add(self, run: Run, *, change: Change = "ADDED") -> None:
        for pod in run.pods:
            self.jobs[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = run.job
            self.update(pod, change)

    def update(self, pod: k.Obj, change: Change = "MODIFIED") -> None:
        """Tell the follower of a pod's change, as the ``published`` bucket says it."""
        job = self.jobs[(pod["metadata"]["namespace"], pod["metadata"]["name"])]
        self.follower.track(normalize_pod(pod, change, job, datetime.now(UTC)))


@contextlib.asynccontextmanager
async def following(
    sim: SimCluster, nc: NATS, topology: Topology, nats: NatsSettings, settings: LogSettings | None = None
) -> AsyncIterator[Following]:
    """A :class:`LogFollower` running (its schedule, its follows) while inside."""
    jobs: dict[tuple[str, str], JobRef] = {}
    settings = settings or LogSettings(retry_s=0.05)
    with KubeGateway.for_url(sim.url, connections=settings.max_follows) as gateway:
        metrics = WatchMetrics()
        follower = LogFollower(gateway, nc, topology, settings, nats, backoff_max_s=0.2, metrics=metrics)
        async with running_until_exit(follower.run):
            yield Following(follower, jobs, metrics)


async def stored(nc: NATS, topology: Topology, job: JobRef, pod: str | None = None) -> list[LogBatch]:
    """The batches stored of a run (of one pod), in order."""
    js = nc.jetstream()
    return [
        stored.batch
        async for stored in parsed_batches(
            read_raw(js, topology, topology.run_logs(job.namespace, job.name, job.uid, pod))
        )
        if stored is not None
    ]


async def stored_texts(nc: NATS, topology: Topology, job: JobRef, pod: str | None = None) -> list[str]:
    """The text of every stored line of a run (of one pod), in order."""
    return [line.text for batch in await stored(nc, topology, job, pod) for line in batch.lines]


def stored_at_least(
    nc: NATS, topology: Topology, job: JobRef, pod: str | None = None
) -> Callable[[int], Awaitable[bool]]:
    """``has(n)``: whether at least ``n`` lines of ``job`` (of one pod) are stored (to wait on
    with ``until``)."""

    async def has(count: int) -> bool:
        return len(await stored_texts(nc, topology, job, pod)) >= count

    return has


@dataclass
class Logged:
    """The simulated cluster, this test's NATS (its streams declared) and settings, for following
    logs and reading back what was stored."""

    sim: SimCluster
    nc: NATS
    js: JetStreamContext
    topology: Topology
    settings: Settings

    def run(self, name: str, workers: int = 1, **options: str) -> Run:
        """A running MPIJob on the cluster (``options``: those of :func:`running_run`)."""
        return running_run(self.sim, name, workers, **options)

    def following(self, logs: LogSettings | None = None) -> contextlib.AbstractAsyncContextManager[Following]:
        """A follower over the cluster while inside (``logs``: its settings, fast retries unless given)."""
        return following(self.sim, self.nc, self.topology, self.settings.nats, logs)

    async def texts(self, job: JobRef, pod: str | None = None) -> list[str]:
        """Every stored line of a run (of one pod), in order."""
        return await stored_texts(self.nc, self.topology, job, pod)

    def has(self, job: JobRef, pod: str | None = None) -> Callable[[int], Awaitable[bool]]:
        """``has(n)``: whether at least ``n`` lines of ``job`` (of one pod) are stored."""
        return stored_at_least(self.nc, self.topology, job, pod)


@pytest.fixture
def logged(
    sim: SimCluster, nats_client: NATS, js: JetStreamContext, topology: Topology, settings: Settings
) -> Logged:
    """This test's cluster and bus, for following logs."""
    return Logged(sim, nats_client, js, topology, settings)
