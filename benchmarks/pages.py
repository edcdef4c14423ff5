"""Pages benchmark: the job list with 100 jobs and a run's page, against the JSON routes they draw from.

The same store as ``benchmarks.api`` (a fresh embedded PostgreSQL filled by SQL: ``--runs`` runs,
100,000 by default, over 200 namespaces, a launcher and 3 workers each, a firing finding on every
failed run), the same app in process (httpx ``ASGITransport``: routing, validation, auth, query,
rendering). Each page is timed beside the JSON routes it is made from, in the same run, one
request at a time, ``--repeat`` times after a warm-up; the pages are signed in with the session
cookie, the JSON routes with the bearer header.

One more run holds ``--log-mib`` MiB of log text (64 by default) on the ``LOGS`` stream of an
embedded NATS, stored as the followers store it (:func:`benchmarks.logs.large_run`), and the
largest manifest a run keeps (64 KiB): its Overview and Configuration tabs are timed beside the
run and attempts routes, its Logs tab (the first 500 lines) beside the logs route's first page.
The Logs tab's search over such a log is the logs route's, measured by ``benchmarks.logs
--search-mib 64``.

Prints one JSON document and writes it to ``benchmarks/results/pages.json``.
Target (issue 37): the job list with 100 jobs < 2 s, a run's page < 1 s (p95).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import update

from benchmarks.api import TOKENS, Scenario, fill, timed_all
from benchmarks.harness import pipeline_services, report
from benchmarks.logs import large_run, store_run
from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.auth import SESSION_COOKIE
from controller.api.limits import DEFAULT_LIMITS
from controller.api.logs import RunLogs
from controller.contract.events import MAX_MANIFEST_BYTES
from controller.metrics import PipelineMetrics
from controller.store.models import Run

LIST_TARGET_MS = 2000
PAGE_TARGET_MS = 1000


def scenarios(client: httpx.AsyncClient, runs: int, big: str | None) -> dict[str, Scenario]:
    bearer = {"Authorization": "Bearer admin"}
    cookie = {"Cookie": f"{SESSION_COOKIE}=admin"}

    def json(path: str, **params: Any) -> Awaitable[httpx.Response]:
        return client.get(path, params=params, headers=bearer)

    def page(path: str, **params: Any) -> Awaitable[httpx.Response]:
        return client.get(path, params=params, headers=cookie)

    def uid(i: int) -> str:
        return f"run-{(i * 7919) % runs}"

    def pair(i: int) -> str:  # two runs of one kind (the fill makes every fifth a TrainJob)
        n = (i * 7919) % (runs - 5)
        return f"run-{n},run-{n + 5}"

    async def json_run_page(i: int, run_uid: str | None = None) -> httpx.Response:
        """What a run's page reads: the run (pods, findings, usage) and its job's attempts."""
        run = await json(f"/api/v1/runs/{run_uid or uid(i)}")
        body = run.json()
        await json(f"/api/v1/namespaces/{body['namespace']}/jobs/{body['name']}/runs", kind=body["kind"])
        return run

    logged = (
        {
            "json_logged_run_and_attempts": lambda i: json_run_page(i, big),
            "page_logged_run_overview": lambda i: page(f"/ui/runs/{big}"),
            "page_logged_run_configuration": lambda i: page(f"/ui/runs/{big}", tab="configuration"),
            "json_logged_logs_500": lambda i: json(f"/api/v1/runs/{big}/logs", limit=500),
            "page_logged_run_logs": lambda i: page(f"/ui/runs/{big}", tab="logs"),
        }
        if big is not None
        else {}
    )
    return {
        "json_list_100": lambda i: json("/api/v1/runs", limit=100),
        "page_jobs_100": lambda i: page("/ui/jobs", limit=100),
        "json_list_100_failed": lambda i: json("/api/v1/runs", limit=100, phase="Failed"),
        "page_jobs_100_failed": lambda i: page("/ui/jobs", limit=100, phase="Failed"),
        "json_run_and_attempts": json_run_page,
        "page_run_overview": lambda i: page(f"/ui/runs/{uid(i)}"),
        "page_run_workers": lambda i: page(f"/ui/runs/{uid(i)}", tab="workers"),
        "json_timeline": lambda i: json(f"/api/v1/runs/{uid(i)}/timeline"),
        "page_run_events": lambda i: page(f"/ui/runs/{uid(i)}", tab="events"),
        "json_compare_2": lambda i: json("/api/v1/compare", runs=pair(i)),
        "page_compare_2": lambda i: page("/ui/compare", runs=pair(i)),
        **logged,
    }


def _largest_manifest() -> str:
    """A manifest of :data:`~controller.contract.events.MAX_MANIFEST_BYTES` (env entries, as a big
    spec has them)."""
    lines = ["apiVersion: kubeflow.org/v2beta1", "kind: MPIJob", "spec:", "  env:"]
    i = 0
    while sum(len(line) + 1 for line in lines) < MAX_MANIFEST_BYTES - 200:
        lines += [f"  - name: VARIABLE_{i:05d}", f"    value: {'x' * 40}"]
        i += 1
    return "\n".join(lines) + "\n"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--log-mib", type=int, default=64, help="log text of one more run (0: none)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="mpijc-bench-pages-") as tmp:
        async with pipeline_services(Path(tmp), consumers=()) as bench:
            fill_s = await fill(bench.engine, args.runs)
            big, made = await large_run(bench, args.log_mib) if args.log_mib else (None, {})
            if big is not None:
                await store_run(bench.engine, big)
                async with bench.engine.begin() as conn:  # the largest manifest a run keeps
                    await conn.execute(
                        update(Run).where(Run.uid == big.uid).values(manifest=_largest_manifest())
                    )
            app = create_app(
                bench.engine,
                PipelineMetrics(),
                StaticAccess(TOKENS),
                limits=replace(DEFAULT_LIMITS, per_token=None),
                run_logs=RunLogs(bench.js, bench.topology),
            )
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=600
            ) as client:
                results = await timed_all(
                    scenarios(client, args.runs, big.uid if big else None), args.repeat, args.warmup
                )
    lists = max(results["page_jobs_100"]["p95_ms"], results["page_jobs_100_failed"]["p95_ms"])
    run_page = ("page_run", "page_compare", "page_logged")
    run_pages = [(name, r) for name, r in results.items() if name.startswith(run_page)]
    pages = max(r["p95_ms"] for _, r in run_pages)
    but_logs = max(r["p95_ms"] for name, r in run_pages if "logs" not in name)
    logged = (
        {
            "logged_run": {
                **made,
                "run_overview": round(
                    results["page_logged_run_overview"]["p50_ms"]
                    / results["json_logged_run_and_attempts"]["p50_ms"],
                    2,
                ),
                "run_logs": round(
                    results["page_logged_run_logs"]["p50_ms"] / results["json_logged_logs_500"]["p50_ms"], 2
                ),
            }
        }
        if big is not None
        else {}
    )
    report(
        "pages",
        {
            "benchmark": "pages",
            "stored": {"runs": args.runs, "pods": args.runs * 4, "pod_states": args.runs * 12},
            "fill_seconds": round(fill_s, 1),
            "repeat": args.repeat,
            "requests": results,
            "page_over_json_p50": {
                "jobs_100": round(results["page_jobs_100"]["p50_ms"] / results["json_list_100"]["p50_ms"], 2),
                "jobs_100_failed": round(
                    results["page_jobs_100_failed"]["p50_ms"] / results["json_list_100_failed"]["p50_ms"], 2
                ),
                "run_overview": round(
                    results["page_run_overview"]["p50_ms"] / results["json_run_and_attempts"]["p50_ms"], 2
                ),
                "compare_2": round(
                    results["page_compare_2"]["p50_ms"] / results["json_compare_2"]["p50_ms"], 2
                ),
                **logged,
            },
            "targets_p95_ms": {"job_list_100": LIST_TARGET_MS, "run_page": PAGE_TARGET_MS},
            "worst_job_list_p95_ms": lists,
            "worst_run_page_p95_ms": pages,
            "worst_run_page_but_logs_tab_p95_ms": but_logs,
            "meets_targets": lists < LIST_TARGET_MS and pages < PAGE_TARGET_MS,
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
