"""Failure drills, timed: how long the controller takes to recover from losing a process or a server.

Each drill runs a burst of OOM job stories (:mod:`controller.testing.drills`) through real
``consume`` processes on its own PostgreSQL and NATS, injects one fault in the middle, and
reports:

- ``baseline_s``: one failure, fed to the watcher pipeline, until its ``finding.firing`` webhook
  arrives (median of three, before the fault);
- ``recovery_s``: the same for a failure fed at the moment of the fault — how long a failure
  goes unreported because of it;
- ``complete``: whether every event, finding and webhook of the burst arrived once (the
  tests assert it; here it is reported).

Drills: ``consumer-kill`` (SIGKILL of one of two ``consume`` processes running every role),
``nats-server-kill`` (SIGKILL of the server leading the JOBS stream of a 3-server cluster,
R3 streams), ``postgres-restart`` (fast shutdown, 2 s down, started again).

    .venv/bin/python -m benchmarks.drills [--jobs 40] [--only consumer-kill]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.harness import report
from controller.bus.streams import connect, ensure_streams
from controller.cli.embedded import EmbeddedNats, EmbeddedPostgres
from controller.contract.settings import DatabaseSettings, NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from controller.store.migrate import upgrade_async
from controller.testing.drills import Drill, FaultInjector, drilling
from controller.testing.natscluster import NatsCluster
from controller.testing.ports import free_port


@contextlib.asynccontextmanager
async def drill_on(workdir: Path, nats_url: str, replicas: int, database_url: str) -> AsyncIterator[Drill]:
    """A :class:`Drill` on these services, its webhook subscribed."""
    await upgrade_async(database_url)
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        database=DatabaseSettings(url=database_url, single_role=True),  # type: ignore[arg-type]
        nats=NatsSettings(url=nats_url, prefix="drill", replicas=replicas),
    )
    topology = Topology("drill")
    nc = await connect(nats_url, "drill-bench")
    js = nc.jetstream()
    await ensure_streams(js, topology, settings.nats)
    engine = make_engine(database_url)
    try:
        async with drilling(settings, topology, js, engine, PipelineMetrics(), workdir) as drill:
            yield drill
    finally:
        await engine.dispose()
        await nc.close()


async def run_drill(drill: Drill, jobs: int, processes: int, fault: FaultInjector) -> dict[str, Any]:
    """Start ``processes`` consumer processes, then the timed burst with ``fault`` in it."""
    for n in range(processes):
        drill.start(f"consumers{n}")
        await drill.running(f"consumers{n}")
    burst = await drill.burst(jobs, fault, timed=True)
    outcome = asdict(burst.outcome)
    return {
        "baseline_s": round(burst.baseline_s or 0, 3),
        "recovery_s": round(burst.recovery_s or 0, 3),
        "complete": burst.outcome.complete,
        "outcome": {k: v for k, v in outcome.items() if not isinstance(v, dict | list) or v},
    }


@contextlib.contextmanager
def single_servers(workdir: Path) -> Iterator[tuple[EmbeddedPostgres, str, str]]:
    """One PostgreSQL and one NATS server: the PostgreSQL object, its URL and NATS's URL."""
    postgres = EmbeddedPostgres(workdir / "pg", free_port())
    nats = EmbeddedNats(workdir / "nats", free_port(), users=False)  # the drill reads every stream itself
    try:
        yield postgres, postgres.start(), nats.start()
    finally:
        nats.stop()
        postgres.stop()


async def consumer_kill(workdir: Path, jobs: int) -> dict[str, Any]:
    with single_servers(workdir) as (_, database_url, nats_url):
        async with drill_on(workdir, nats_url, 1, database_url) as drill:

            async def kill() -> None:
                drill.processes["consumers0"].send_signal(signal.SIGKILL)

            return await run_drill(drill, jobs, 2, kill)


async def nats_server_kill(workdir: Path, jobs: int) -> dict[str, Any]:
    postgres = EmbeddedPostgres(workdir / "pg", free_port())
    try:
        database_url = postgres.start()
        with NatsCluster(workdir / "nats") as cluster:
            async with drill_on(workdir, cluster.url, 3, database_url) as drill:

                async def kill() -> None:
                    cluster.kill(cluster.leader_of(drill.topology.stream("jobs")))

                return await run_drill(drill, jobs, 1, kill)
    finally:
        postgres.stop()


async def postgres_restart(workdir: Path, jobs: int) -> dict[str, Any]:
    with single_servers(workdir) as (postgres, database_url, nats_url):
        async with drill_on(workdir, nats_url, 1, database_url) as drill:

            async def start_again() -> None:
                await asyncio.sleep(2)
                await asyncio.to_thread(postgres.start)

            async def restart() -> Awaitable[None]:
                await asyncio.to_thread(postgres.stop)
                return start_again()

            return await run_drill(drill, jobs, 1, restart)


DRILLS = {
    "consumer-kill": consumer_kill,
    "nats-server-kill": nats_server_kill,
    "postgres-restart": postgres_restart,
}


async def main(jobs: int, only: list[str]) -> dict[str, Any]:
    results: dict[str, Any] = {"jobs": jobs}
    for name, drill in DRILLS.items():
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory(prefix=f"mpijc-drill-{name}-") as workdir:
            results[name] = await drill(Path(workdir), jobs)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40, help="job stories in the burst")
    parser.add_argument("--only", action="append", choices=list(DRILLS), default=[])
    args = parser.parse_args()
    report("drills", asyncio.run(main(args.jobs, args.only)))
