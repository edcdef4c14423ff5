"""Runs whose pods write logs on the simulated API server, a follower running over them, and what
it stored on ``LOGS``, for the log tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS

from controller.bus.logstore import read_run
from controller.contract.events import JobRef
from controller.contract.logs import LogBatch
from controller.contract.settings import LogSettings, NatsSettings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from watchers.following import LogFollower

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

    def __init__(self, follower: LogFollower, jobs: dict[tuple[str, str], JobRef]) -> None:
        self.follower = follower
        self.jobs = jobs

    def add(self, run: Run, *, change: str = "ADDED") -> None:
        for pod in run.pods:
            self.jobs[(pod["metadata"]["namespace"], pod["metadata"]["name"])] = run.job
            self.follower.track(change, pod)

    def update(self, pod: k.Obj) -> None:
        self.follower.track("MODIFIED", pod)


@contextlib.asynccontextmanager
async def following(
    sim: SimCluster, nc: NATS, topology: Topology, nats: NatsSettings, settings: LogSettings | None = None
) -> AsyncIterator[Following]:
    """A :class:`LogFollower` running (its schedule, its follows) while inside."""
    jobs: dict[tuple[str, str], JobRef] = {}
    with KubeGateway.for_url(sim.url) as gateway:
        settings = settings or LogSettings(retry_s=0.05)
        follower = LogFollower(gateway, nc, topology, settings, nats, jobs, backoff_max_s=0.2)
        stop = asyncio.Event()
        task = asyncio.create_task(follower.run(stop))
        try:
            yield Following(follower, jobs)
        finally:
            stop.set()
            await task


async def stored(nc: NATS, topology: Topology, job: JobRef, pod: str | None = None) -> list[LogBatch]:
    """The batches stored of a run (of one pod), in order."""
    js = nc.jetstream()
    return [
        stored.batch
        async for stored in read_run(js, topology, job.namespace, job.name, job.uid, pod=pod)
        if stored is not None
    ]


async def stored_texts(nc: NATS, topology: Topology, job: JobRef, pod: str | None = None) -> list[str]:
    """The text of every stored line of a run (of one pod), in order."""
    return [line.text for batch in await stored(nc, topology, job, pod) for line in batch.lines]
