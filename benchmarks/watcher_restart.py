"""The watcher alone, restarted on a big cluster: how soon a pod that fails as its watches resume
is on the JOBS stream (issue 40: a restart's failure waits for nothing the watcher can avoid).

A simulated cluster of ``--jobs`` running MPIJobs x ``--workers`` running workers + launcher
(as :mod:`benchmarks.coldstart` populates it) is watched once, in this process, until every
object is on JOBS and the watches' positions are stored. Then, ``--rounds`` times, the watchers
start again (their versions loaded, their watches resumed with a list beside each) and, as soon
as the pods' watch is open, worker 1 of ``--failures`` more jobs is OOM-killed: from each kill to
that pod on JOBS (``jobs.<ns>.<job>.urgent``), p50/p99/max per round. The watcher, the simulated
API server and the reader share this process (the server's threads take the GIL as a real
``up``'s do not): compare runs of this benchmark with each other only. Embedded NATS.

    .venv/bin/python -m benchmarks.watcher_restart [--jobs 300] [--workers 16] [--failures 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg

from benchmarks.coldstart import oom_kill, percentiles, populate
from benchmarks.harness import report
from controller.bus.streams import connect, ensure_streams
from controller.cli.embedded import EmbeddedServices
from controller.contract.events import PodObserved, parse_event
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.metrics import PipelineMetrics
from controller.testing.ports import free_port
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from watchers.service import run_watchers


class Failed:
    """When each job's OOM-killed pod reached JOBS, by job name."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}

    async def on(self, msg: Msg) -> None:
        event = parse_event(msg.data)
        if isinstance(event, PodObserved) and any(c.reason == "OOMKilled" for c in event.containers):
            self.arrived.setdefault(event.job.name, time.monotonic())


async def watch_once(
    settings: Settings,
    sim: SimCluster,
    until_done: Callable[[], Awaitable[bool] | bool],
    meanwhile: Callable[[], dict[str, float]] | None = None,
) -> dict[str, float] | None:
    """Run the watchers until ``until_done()`` holds (after ``meanwhile()``, called once the pods'
    watch is open: it returns what it injected and when), then stop them."""
    assert settings.nats.url
    nc = await connect(settings.nats.url, "bench-watcher")
    stop = asyncio.Event()
    injected = None
    with KubeGateway.for_url(sim.url) as gateway:
        task = asyncio.create_task(
            run_watchers(settings, gateway, nc, Topology(settings.nats.prefix), PipelineMetrics(), stop)
        )
        try:
            if meanwhile is not None:
                await until(lambda: any(w.startswith("pods[training") for w in sim.open_watches()), 60)
                injected = meanwhile()
            await until(until_done, 120, interval_s=0.01)
            await asyncio.sleep(1.5)  # positions stored
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            await nc.drain()
    return injected


async def measure(data_dir: Path, jobs: int, workers: int, failures: int, rounds: int) -> dict[str, Any]:
    topology = Topology("bench")
    with (
        EmbeddedServices(data_dir, free_port(), free_port(), "unused", None, nats_users=False) as services,
        SimCluster() as sim,
    ):
        settings = Settings(_env_file=None, nats=NatsSettings(url=services.nats_url, prefix=topology.prefix))
        nc = await connect(services.nats_url, "bench-reader")
        js = nc.jetstream()
        await ensure_streams(js, topology, settings.nats)
        victims, _ = populate(sim, jobs, workers)
        failed = Failed()
        await nc.subscribe(topology.job_observations().removesuffix(".job") + ".urgent", cb=failed.on)

        async def all_published() -> bool:
            return (await js.stream_info(topology.stream("jobs"))).state.messages >= jobs * (workers + 2)

        started = time.monotonic()
        await watch_once(settings, sim, all_published)
        first_s = round(time.monotonic() - started, 2)
        results: list[dict[str, float]] = []
        for n in range(rounds):
            names = [f"job-{j}" for j in range(n * failures, (n + 1) * failures)]

            def kill(names: list[str] = names) -> dict[str, float]:
                at = {}
                for name in names:
                    oom_kill(sim, victims[name])
                    at[name] = time.monotonic()
                return at

            def arrived(names: list[str] = names) -> bool:
                return all(name in failed.arrived for name in names)

            injected = await watch_once(settings, sim, arrived, kill) or {}
            results.append(percentiles(injected, failed.arrived))
        await nc.close()
    return {
        "jobs": jobs,
        "workers": workers,
        "failures": failures,
        "first_watch_s": first_s,
        "kill_as_pods_watch_resumes_to_jobs_s": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--failures", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-watcher-") as data_dir:
        result = asyncio.run(measure(Path(data_dir), args.jobs, args.workers, args.failures, args.rounds))
    report("watcher_restart", result)


if __name__ == "__main__":
    main()
