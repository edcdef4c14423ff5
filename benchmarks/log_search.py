"""Log searches against the rest of the API (docs/security.md, "The tenant model"): another
tenant's requests and the liveness probes while hostile searches run.

Embedded PostgreSQL and NATS; the API served by uvicorn in this process as ``serve_api`` serves
it (the metrics port on its own thread and loop), the clients on its loop (a request that waits
for the loop is measured as such). One tenant's run holds ``--batches`` batches of 64 lines of
4,000 `a` (256 KiB each, the issue's run); ``--searchers`` clients search it at once, each
walking every page (following partial pages' cursors): the issue's
expression ``(a?){1000}a{1000}c`` (refused now) and the dearest one allowed,
``(a?){150}a{150}c``. Meanwhile a probe asks every ``--every-ms``: ``/healthz`` on the API port,
``/healthz`` on the metrics port (the kubelet's liveness probe) and another tenant's
``GET /api/v1/runs/{uid}``, until the searches end and for ``--seconds`` at least: p50/p99/max
of each, and of the searches' pages.

    python -m benchmarks.log_search [--batches 16] [--searchers 10] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from benchmarks.harness import Bench, pipeline_services, report
from controller.api.access import StaticAccess
from controller.api.app import create_app, metrics_app
from controller.api.logs import RunLogs, SearchLimits
from controller.api.server import serve_in_thread, server_config
from controller.bus.logstore import publish_batches
from controller.contract.logs import LogBatch, LogLine, LogPosition
from controller.contract.settings import ApiSettings, StaticUser
from controller.metrics import PipelineMetrics
from controller.testing.ports import free_port
from controller.testing.waits import until
from tests.api_fixtures import T0, insert_runs, run_row

TENANT, OTHER = "tenant", "other"
EXPRESSIONS = {"issue": "(a?){1000}a{1000}c", "allowed": "(a?){150}a{150}c"}


def stats(took: list[float]) -> dict[str, float | int]:
    """Count, p50, p99 and max of ``took`` (milliseconds)."""
    if not took:
        return {"n": 0}
    ordered = sorted(took)
    return {
        "n": len(ordered),
        "p50_ms": round(ordered[len(ordered) // 2], 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 1),
        "max_ms": round(ordered[-1], 1),
    }


async def runs(bench: Bench, batches: int) -> tuple[str, str]:
    """The searched run (``batches`` batches of `a` lines, team-a) and another tenant's (team-b)."""
    searched, other = str(uuid.uuid4()), str(uuid.uuid4())
    await insert_runs(
        bench.engine,
        [
            run_row("team-a", "llm", T0, uid=searched, phase="Running"),
            run_row("team-b", "other", T0, uid=other),
        ],
    )
    base = int(T0.timestamp()) * 1_000_000_000
    stored = []
    for b in range(batches):
        lines = tuple(LogLine(ts=base + b * 1000 + i, text="a" * 4000) for i in range(64))
        end = LogPosition(ts=lines[-1].ts, ties=1, stored_bytes=(b + 1) * 64 * 4000)
        stored.append(
            LogBatch(
                run_uid=searched,
                namespace="team-a",
                job="llm",
                pod="llm-launcher",
                container="main",
                role="launcher",
                lines=lines,
                position=end,
            )
        )
    await publish_batches(bench.js, bench.topology, stored, 30.0)
    return searched, other


async def search_walk(
    http: httpx.AsyncClient, uid: str, q: str, pages: list[float], codes: list[int]
) -> None:
    """One search, every page of it."""
    cursor = None
    while True:
        params = {"q": q, "regex": "true"} | ({"cursor": cursor} if cursor else {})
        began = time.perf_counter()
        answer = await http.get(
            f"/api/v1/runs/{uid}/logs", params=params, headers={"Authorization": f"Bearer {TENANT}"}
        )
        pages.append((time.perf_counter() - began) * 1000)
        codes.append(answer.status_code)
        if answer.status_code != 200 or (cursor := answer.json()["next_cursor"]) is None:
            return


async def measure(args: argparse.Namespace, bench: Bench, expression: str) -> dict[str, Any]:
    searched, other = await runs(bench, args.batches)
    users = {
        TENANT: StaticUser(username="tenant", namespaces=["team-a"]),
        OTHER: StaticUser(username="other", namespaces=["team-b"]),
    }
    app = create_app(
        bench.engine,
        PipelineMetrics(),
        StaticAccess(users),
        run_logs=RunLogs(bench.js, bench.topology),
        search=SearchLimits(),
    )
    settings = ApiSettings(shutdown_grace_s=0.1)
    api_port, metrics_port = free_port(), free_port()
    api = uvicorn.Server(server_config(app, settings, api_port))
    metrics = uvicorn.Server(
        server_config(metrics_app(app, asyncio.get_running_loop()), settings, metrics_port, capped=False)
    )
    serving = [
        asyncio.create_task(api.serve()),
        asyncio.create_task(serve_in_thread(metrics, "metrics-port")),
    ]
    await until(lambda: api.started and metrics.started, 30, lambda: "uvicorn did not start")
    probes: dict[str, list[float]] = {"api_healthz": [], "metrics_healthz": [], "other_tenant_run": []}
    pages: list[float] = []
    codes: list[int] = []
    walks: list[float] = []
    deadline = time.monotonic() + args.seconds
    searching = args.searchers
    limits = httpx.Limits(max_connections=args.searchers + 8)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{api_port}", timeout=600, limits=limits) as http:

        async def searcher() -> None:
            nonlocal searching
            began = time.perf_counter()
            await search_walk(http, searched, expression, pages, codes)
            walks.append((time.perf_counter() - began) * 1000)
            searching -= 1

        async def probe() -> None:
            targets = {
                "api_healthz": (f"http://127.0.0.1:{api_port}/healthz", {}),
                "metrics_healthz": (f"http://127.0.0.1:{metrics_port}/healthz", {}),
                "other_tenant_run": (
                    f"http://127.0.0.1:{api_port}/api/v1/runs/{other}",
                    {"Authorization": f"Bearer {OTHER}"},
                ),
            }
            while searching or time.monotonic() < deadline:
                for name, (url, headers) in targets.items():
                    began = time.perf_counter()
                    answer = await http.get(url, headers=headers)
                    assert answer.status_code == 200, answer.text
                    probes[name].append((time.perf_counter() - began) * 1000)
                await asyncio.sleep(args.every_ms / 1000)

        await asyncio.gather(probe(), *(searcher() for _ in range(args.searchers)))
    api.should_exit = metrics.should_exit = True
    await asyncio.gather(*serving)
    return {
        "expression": expression,
        "search_pages": stats(pages) | {"status": sorted(set(codes))},
        "whole_searches": stats(walks),
        **{name: stats(took) for name, took in probes.items()},
    }


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-search-") as tmp:
        async with pipeline_services(Path(tmp), consumers=()) as bench:
            return {
                "batches": args.batches,
                "batch_kib": 64 * 4000 // 1024,
                "searchers": args.searchers,
                "seconds": args.seconds,
                **{name: await measure(args, bench, q) for name, q in EXPRESSIONS.items()},
            }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--searchers", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--every-ms", type=float, default=50.0)
    report("log_search", asyncio.run(main(parser.parse_args())))
