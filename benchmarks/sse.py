"""Live event streams fanned out: many ``wait`` clients on one API process.

An embedded PostgreSQL; the API (the app ``serve_api`` runs, under uvicorn, in a process of its
own so its CPU and RSS are its own) with its stream limits raised to the clients; ``--clients``
Server-Sent Event streams of ``--runs`` runs (clients share runs evenly), opened through the by-uid
endpoint as ``wait`` opens its by-name one. Every ``--every`` seconds one transaction adds a
timeline entry to every run (its commit time in its summary); each client notes when the entry
reached it. Reported: event → client p50/p99/max, the API process's CPU (cores used) and RSS while
the clients wait, and the same CPU with the clients connected but nothing written (the cost of
polling alone).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text

from benchmarks.harness import cpu_s, postgres_cpu_s, report, rss_mib
from controller.cli.embedded import EmbeddedPostgres
from controller.store import migrate
from controller.store.engine import make_engine
from controller.testing.ports import free_port

TOKEN = "bench"


def serve(url: str, port: int, clients: int, poll_s: float) -> None:
    """The API process: the app over ``url`` on ``port``, streams bounded above ``clients``."""
    import uvicorn

    from controller.api.access import StaticAccess
    from controller.api.app import create_app
    from controller.api.limits import ApiLimits
    from controller.api.server import server_config
    from controller.api.streaming import StreamLimits
    from controller.contract.settings import ApiSettings, StaticUser
    from controller.metrics import PipelineMetrics

    settings = ApiSettings(
        max_connections=clients + 50,
        max_connections_per_address=clients + 50,  # every client is this process, on one address
        rate_per_s=0,
        events_poll_s=poll_s,
        events_max_streams=clients + 10,
        events_max_streams_per_client=clients + 10,
        events_max_streams_per_namespace=clients + 10,  # every run is of one namespace
    )
    app = create_app(
        make_engine(url, pool_size=20),
        PipelineMetrics(),
        StaticAccess({TOKEN: StaticUser(username="bench", namespaces=["*"])}),
        limits=ApiLimits.from_settings(settings),
        streams=StreamLimits.from_settings(settings),
    )
    uvicorn.Server(server_config(app, settings, port)).run()


async def seed(url: str, runs: int) -> None:
    engine = make_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                """
                INSERT INTO runs (uid, kind, namespace, name, attempt, previous_uid, phase, resource_version,
                                  conditions, spec, labels, created_at, started_at, finished_at, deleted_at,
                                  first_observed_at, last_observed_at)
                SELECT 'run-' || i, 'MPIJob', 'team', 'job-' || i, 1, NULL, 'Running', 1, '[]', '{}', '{}',
                       now(), now(), NULL, NULL, now(), now()
                FROM generate_series(0, :runs - 1) AS i
                """
            ),
            {"runs": runs},
        )
    await engine.dispose()


async def write_round(url: str, runs: int, round_no: int) -> None:
    engine = make_engine(url)
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_current_xact_id()"))
        await conn.execute(
            text(
                """
                INSERT INTO timeline (run_uid, at, source, summary, detail, dedup_key)
                SELECT 'run-' || i, now(), 'pod', :summary, '{}', 'bench:' || :round || ':' || i
                FROM generate_series(0, :runs - 1) AS i
                """
            ),
            {"runs": runs, "round": str(round_no), "summary": repr(time.time())},
        )
    await engine.dispose()


async def client(
    base: str, uid: str, latencies: list[float], connected: asyncio.Event, counter: list[int]
) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    timeout = httpx.Timeout(30.0, read=None)
    async with (
        httpx.AsyncClient(timeout=timeout) as http,
        http.stream("GET", f"{base}/api/v1/runs/{uid}/events", headers=headers) as response,
    ):
        if response.status_code != 200:
            raise RuntimeError(f"{uid}: {response.status_code}")
        counter[0] += 1
        if counter[0] == counter[1]:
            connected.set()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = json.loads(line[6:])
                latencies.append(time.time() - float(data["summary"]))


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-sse-") as tmp:
        postgres = EmbeddedPostgres(Path(tmp) / "postgres", free_port())
        postgres.start()
        api: subprocess.Popen[bytes] | None = None
        try:
            url = f"postgresql://postgres@127.0.0.1:{postgres.port}/postgres"
            await migrate.upgrade_async(url)
            await seed(url, args.runs)
            port = free_port()
            serving = ["--serve", url, str(port), str(args.clients), "--poll", str(args.poll)]
            api = subprocess.Popen([sys.executable, "-m", "benchmarks.sse", *serving])  # noqa: ASYNC220
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(timeout=1) as probe:
                for _ in range(300):
                    try:
                        await probe.get(f"{base}/healthz")
                        break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.1)
            latencies: list[float] = []
            connected, counter = asyncio.Event(), [0, args.clients]
            tasks = [
                asyncio.create_task(client(base, f"run-{i % args.runs}", latencies, connected, counter))
                for i in range(args.clients)
            ]
            await asyncio.wait_for(connected.wait(), 120)
            rss_idle = rss_mib(api.pid)
            datadir = Path(tmp) / "postgres"

            def used() -> tuple[float, float, float, float]:
                return cpu_s(api.pid), postgres_cpu_s(datadir), time.process_time(), time.monotonic()

            def cores(before: tuple[float, ...]) -> dict[str, float]:
                after = used()
                span = after[3] - before[3]
                names = ("api", "postgres", "clients")
                return {name: round((after[i] - before[i]) / span, 3) for i, name in enumerate(names)}

            before = used()
            await asyncio.sleep(args.every * args.rounds)
            idle_cores = cores(before)
            before = used()
            for n in range(args.rounds):
                await write_round(url, args.runs, n)
                await asyncio.sleep(args.every)
            busy_cores = cores(before)
            rss_busy = rss_mib(api.pid)
            expected = args.clients * args.rounds
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            if api is not None:
                api.terminate()
                api.wait(10)
            postgres.stop()
    ordered = sorted(latencies)
    q = statistics.quantiles(ordered, n=100, method="inclusive") if len(ordered) > 1 else [0.0] * 99
    return {
        "clients": args.clients,
        "runs": args.runs,
        "poll_s": args.poll,
        "events_expected": expected,
        "events_received": len(latencies),
        "latency_ms": {
            "p50": round(q[49] * 1000, 1),
            "p99": round(q[98] * 1000, 1),
            "max": round(ordered[-1] * 1000, 1) if ordered else None,
        },
        "cores_polling_only": idle_cores,
        "cores_with_events": busy_cores,
        "api_rss_mib": {"connected": round(rss_idle, 1), "after_events": round(rss_busy, 1)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", nargs=3, metavar=("URL", "PORT", "CLIENTS"), help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), int(args.serve[2]), args.poll)
        return
    report("sse", asyncio.run(measure(args)))


if __name__ == "__main__":
    main()
