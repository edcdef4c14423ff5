"""Pages benchmark: the job list with 100 jobs and a run's page, against the JSON routes they draw from.

The same store as ``benchmarks.api`` (a fresh embedded PostgreSQL filled by SQL: ``--runs`` runs,
100,000 by default, over 200 namespaces, a launcher and 3 workers each, a firing finding on every
failed run), the same app in process (httpx ``ASGITransport``: routing, validation, auth, query,
rendering). Each page is timed beside the JSON routes it is made from, in the same run, one
request at a time, ``--repeat`` times after a warm-up; the pages are signed in with the session
cookie, the JSON routes with the bearer header. The Logs tab's search over a 64 MiB log is the
logs route's, measured by ``benchmarks.logs --search-mib 64``.

Prints one JSON document and writes it to ``benchmarks/results/pages.json``.
Target (issue 37): the job list with 100 jobs < 2 s, a run's page < 1 s (p95).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable
from typing import Any

import httpx

from benchmarks.api import Scenario, filled_app, timed_all
from benchmarks.harness import report
from controller.api.auth import SESSION_COOKIE

LIST_TARGET_MS = 2000
PAGE_TARGET_MS = 1000


def scenarios(client: httpx.AsyncClient, runs: int) -> dict[str, Scenario]:
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

    async def json_run_page(i: int) -> httpx.Response:
        """What a run's page reads: the run (pods, findings, usage) and its job's attempts."""
        run = await json(f"/api/v1/runs/{uid(i)}")
        body = run.json()
        await json(f"/api/v1/namespaces/{body['namespace']}/jobs/{body['name']}/runs", kind=body["kind"])
        return run

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
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    args = parser.parse_args()

    async with filled_app(args.runs, "pages") as (client, fill_s):
        results = await timed_all(scenarios(client, args.runs), args.repeat, args.warmup)
    lists = max(results["page_jobs_100"]["p95_ms"], results["page_jobs_100_failed"]["p95_ms"])
    pages = max(r["p95_ms"] for name, r in results.items() if name.startswith(("page_run", "page_compare")))
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
            },
            "targets_p95_ms": {"job_list_100": LIST_TARGET_MS, "run_page": PAGE_TARGET_MS},
            "worst_job_list_p95_ms": lists,
            "worst_run_page_p95_ms": pages,
            "meets_targets": lists < LIST_TARGET_MS and pages < PAGE_TARGET_MS,
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
