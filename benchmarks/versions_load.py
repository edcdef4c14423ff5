"""The watcher's restart reads of the ``published`` bucket, alone: the versions load
(:meth:`watchers.published.PublishedVersions.load`) and the log followers' first pass over the
pods (:func:`watchers.published.watch_pods` until caught up), over a bucket of ``--pods`` pods
and ``--jobs`` jobs as a relist leaves it, on the embedded NATS. CPU seconds of this process
(the reader) and wall seconds, best and median of ``--rounds``; JSON output.

``.venv/bin/python -m benchmarks.versions_load [--jobs 300 --pods 5100 --rounds 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import report
from controller.bus.streams import connect
from controller.bus.versions import open_published
from controller.cli.embedded import EmbeddedServices
from controller.contract.events import ContainerState, JobObserved, JobRef, PodObserved
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology
from controller.testing.ports import free_port
from watchers.published import PublishedVersions, _value, watch_pods

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def objects(jobs: int, pods: int) -> list[JobObserved | PodObserved]:
    """``jobs`` running MPIJobs and ``pods`` pods spread over them, as the watcher publishes them."""
    runs = [JobRef(uid=f"job-{j}", kind="MPIJob", namespace="team-a", name=f"train-{j}") for j in range(jobs)]
    events: list[JobObserved | PodObserved] = [
        JobObserved(
            change="ADDED",
            uid=run.uid,
            kind="MPIJob",
            namespace=run.namespace,
            name=run.name,
            resource_version=str(j + 1),
            phase="Running",
            labels={"team": "a"},
            created_at=T0,
            started_at=T0,
            observed_at=T0,
        )
        for j, run in enumerate(runs)
    ]
    for p in range(pods):
        run = runs[p % jobs]
        index = p // jobs
        events.append(
            PodObserved(
                change="ADDED",
                job=run,
                uid=f"pod-{p}",
                name=f"{run.name}-{'launcher' if index == 0 else f'worker-{index - 1}'}",
                namespace=run.namespace,
                resource_version=str(jobs + p + 1),
                role="launcher" if index == 0 else "worker",
                index=None if index == 0 else index - 1,
                phase="Running",
                node=f"node-{p % 64}",
                containers=(ContainerState(name="main", state="running", ready=True, started_at=T0),),
                created_at=T0,
                observed_at=T0,
            )
        )
    return events


async def timed(work: Callable[[], Awaitable[object]], rounds: int) -> dict[str, Any]:
    """CPU and wall seconds of ``work`` over ``rounds`` rounds: best and median."""
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(rounds):
        started_cpu, started = time.process_time(), time.perf_counter()
        await work()
        cpu.append(time.process_time() - started_cpu)
        wall.append(time.perf_counter() - started)
    return {
        "cpu_s_best": round(min(cpu), 3),
        "cpu_s_median": round(statistics.median(cpu), 3),
        "wall_s_best": round(min(wall), 3),
        "wall_s_median": round(statistics.median(wall), 3),
    }


async def measure(data_dir: Path, jobs: int, pods: int, rounds: int) -> dict[str, Any]:
    with EmbeddedServices(data_dir, free_port(), free_port(), "unused", None, nats_users=False) as services:
        nc = await connect(services.nats_url, "bench-versions")
        try:
            topology, settings = Topology("bench"), NatsSettings()
            kv = await open_published(nc.jetstream(), topology, settings)
            for event in objects(jobs, pods):
                await kv.put(f"{event.type}.{event.uid}", _value(event).encode())

            held: list[int] = []

            async def load() -> None:
                held.append(await PublishedVersions(nc, topology).load(settings))

            async def learn_pods() -> None:
                pods = watch_pods(kv)
                try:
                    async for _, _, caught_up in pods:
                        if caught_up:
                            return
                finally:
                    await pods.aclose()

            result = {"load": await timed(load, rounds), "follow_pods": await timed(learn_pods, rounds)}
            return {"jobs": jobs, "pods": pods, "versions": held[-1], "rounds": rounds, **result}
        finally:
            await nc.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--pods", type=int, default=5100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-versions-") as data_dir:
        result = asyncio.run(measure(Path(data_dir), args.jobs, args.pods, args.rounds))
    report("versions_load", result)


if __name__ == "__main__":
    main()
