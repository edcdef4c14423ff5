"""API benchmark: list and compare latency over 100,000 stored runs.

A fresh embedded PostgreSQL, migrated, is filled by SQL (``generate_series``) with realistic
rows: 100,000 runs over 200 namespaces and 5,000 job names (20 attempts each), MPIJobs and
TrainJobs, 70 % succeeded / 20 % failed / 7 % running / 3 % pending, labels and a full spec;
a launcher and 3 workers per run with 3 recorded states each (400,000 pods, 1.2 million pod
states); a firing finding on every failed run. Then each request shape is sent through the
whole app in process (httpx ``ASGITransport``: routing, validation, auth, query, serialisation),
``--repeat`` times after a warm-up, one at a time, and its latency percentiles are reported.

Prints one JSON document and writes it to ``benchmarks/results/api.json``.
Target (docs/architecture.md): p95 < 50 ms for list and compare with 100,000 stored runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.harness import report
from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.limits import DEFAULT_LIMITS
from controller.cli.embedded import EmbeddedPostgres
from controller.contract.settings import StaticUser
from controller.metrics import PipelineMetrics
from controller.store import migrate
from controller.store.engine import make_engine
from controller.testing.ports import free_port

NAMESPACES = 200
JOB_NAMES = 5_000
TOKENS = {
    "admin": StaticUser(username="admin", namespaces=["*"]),
    "team": StaticUser(username="team", namespaces=[f"ns-{i}" for i in range(0, NAMESPACES, 20)]),
}

Scenario = Callable[[int], Awaitable[httpx.Response]]
"""One request shape: the ``i``-th request of it sent, its response."""

FILL = [
    """
    INSERT INTO runs (uid, kind, namespace, name, attempt, previous_uid, phase, resource_version,
                      conditions, spec, labels, created_at, started_at, finished_at, deleted_at,
                      first_observed_at, last_observed_at)
    SELECT 'run-' || i,
           CASE WHEN i % 5 = 0 THEN 'TrainJob' ELSE 'MPIJob' END,
           'ns-' || (i % :namespaces),
           'job-' || (i % :names),
           i / :names + 1,
           CASE WHEN i >= :names THEN 'run-' || (i - :names) END,
           phase,
           i,
           jsonb_build_array(jsonb_build_object(
               'type', 'Created', 'status', 'True', 'reason', 'MPIJobCreated')),
           jsonb_build_object(
               'workers', 2 + i % 7, 'slots_per_worker', 8, 'mpi_implementation', 'OpenMPI',
               'suspend', false,
               'launcher', jsonb_build_object(
                   'replicas', 1, 'image', 'registry.example.com/train-launcher:2.3',
                   'command', jsonb_build_array('mpirun', 'python', 'train.py'),
                   'resources', jsonb_build_object(
                       'limits', jsonb_build_object('cpu', '1', 'memory', '2Gi'))),
               'worker', jsonb_build_object(
                   'replicas', 2 + i % 7, 'image', 'registry.example.com/train:2.' || (i % 4),
                   'resources', jsonb_build_object(
                       'limits', jsonb_build_object(
                           'memory', (16 * (1 + i % 3)) || 'Gi', 'nvidia.com/gpu', '8'),
                       'requests', jsonb_build_object(
                           'memory', (16 * (1 + i % 3)) || 'Gi', 'nvidia.com/gpu', '8')))),
           jsonb_build_object('team', 'ns-' || (i % :namespaces), 'exp', (i % 50)::text),
           created,
           CASE WHEN phase <> 'Pending' THEN created + interval '40 seconds' END,
           CASE WHEN phase IN ('Succeeded', 'Failed')
                THEN created + (600 + i % 3000) * interval '1 second' END,
           NULL, created, created
    FROM (
        SELECT i,
               now() - (:runs - i) * interval '1 minute' AS created,
               CASE WHEN i % 100 < 70 THEN 'Succeeded' WHEN i % 100 < 90 THEN 'Failed'
                    WHEN i % 100 < 97 THEN 'Running' ELSE 'Pending' END AS phase
        FROM generate_series(0, :runs - 1) AS i
    ) AS r
    """,
    """
    INSERT INTO pods (uid, run_uid, namespace, name, role, index, phase, reason, node, resource_version,
                      restart_count, containers, resources, created_at, last_observed_at, deleted_at)
    SELECT r.uid || '-p' || p, r.uid, r.namespace,
           r.name || CASE WHEN p = 0 THEN '-launcher' ELSE '-worker-' || (p - 1) END,
           CASE WHEN p = 0 THEN 'launcher' ELSE 'worker' END, CASE WHEN p = 0 THEN NULL ELSE p - 1 END,
           CASE WHEN r.phase = 'Failed' AND p = 2 THEN 'Failed' ELSE 'Running' END, NULL,
           'node-' || (p + r.resource_version % 100),
           r.resource_version * 10 + p, p % 2,
           jsonb_build_array(jsonb_build_object('name', 'main', 'state', 'running', 'restart_count', p % 2)),
           '{"limits": {"memory": "16Gi"}}'::jsonb, r.created_at, r.created_at, NULL
    FROM runs r CROSS JOIN generate_series(0, 3) AS p
    """,
    """
    INSERT INTO pod_states (pod_uid, run_uid, resource_version, phase, reason, node, containers, log_tail,
                            observed_at)
    SELECT p.uid, p.run_uid, p.resource_version * 10 + s,
           CASE s WHEN 0 THEN 'Pending' WHEN 1 THEN 'Running' ELSE p.phase END, NULL, p.node,
           CASE WHEN s = 2 AND p.phase = 'Failed'
                THEN '[{"name": "main", "state": "terminated", "reason": "OOMKilled",
                        "exit_code": 137}]'::jsonb
                ELSE p.containers END,
           '[]'::jsonb, p.created_at + (s * 20 + coalesce(p.index, 0)) * interval '1 second'
    FROM pods p CROSS JOIN generate_series(0, 2) AS s
    """,
    """
    INSERT INTO findings (id, run_uid, namespace, job_name, rule, severity, status, root_cause,
                          evidence, remediation, doc_anchor, revision, superseded_by, first_seen,
                          last_seen, resolved_at)
    SELECT 'f-' || uid, uid, namespace, name, 'oom', 'critical', 'firing',
           'Worker 1 failed: out of memory (limit 16Gi).',
           '[{"source": "pod/x-worker-1", "field": "containers[main].reason", "value": "OOMKilled"}]'::jsonb,
           '["Increase worker memory or reduce the batch size."]'::jsonb,
           'docs/troubleshooting.md#oom', 1, NULL,
           finished_at, finished_at, NULL
    FROM runs WHERE phase = 'Failed'
    """,
]


async def fill(engine: AsyncEngine, runs: int) -> float:
    start = time.perf_counter()
    params = {"runs": runs, "namespaces": NAMESPACES, "names": JOB_NAMES}
    async with engine.begin() as conn:
        for statement in FILL:
            await conn.execute(text(statement), {k: v for k, v in params.items() if f":{k}" in statement})
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        await conn.execute(text("VACUUM ANALYZE"))
    return time.perf_counter() - start


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    q = statistics.quantiles(ordered, n=100, method="inclusive")
    return {
        "p50_ms": round(q[49] * 1000, 2),
        "p95_ms": round(q[94] * 1000, 2),
        "p99_ms": round(q[98] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
    }


async def timed(call: Scenario, repeat: int, warmup: int) -> dict[str, float]:
    samples: list[float] = []
    for i in range(warmup + repeat):
        start = time.perf_counter()
        response = await call(i)
        elapsed = time.perf_counter() - start
        if response.status_code != 200:
            raise RuntimeError(f"{response.request.url}: {response.status_code} {response.text[:200]}")
        if i >= warmup:
            samples.append(elapsed)
    return percentiles(samples)


def scenarios(client: httpx.AsyncClient, runs: int) -> dict[str, Scenario]:
    admin = {"Authorization": "Bearer admin"}
    team = {"Authorization": "Bearer team"}
    deep: list[str] = []

    def get(path: str, headers: Mapping[str, str] = admin, **params: Any) -> Awaitable[httpx.Response]:
        return client.get(path, params=params, headers=dict(headers))

    async def deep_page(i: int) -> httpx.Response:
        """Walk the whole list page by page (50 a page), restarting at the end."""
        params: dict[str, Any] = {"limit": 50, "cursor": deep[-1]} if deep else {"limit": 50}
        response = await client.get("/api/v1/runs", params=params, headers=admin)
        cursor = response.json()["next_cursor"]
        if cursor:
            deep.append(cursor)
        else:
            deep.clear()
        return response

    def uid(i: int) -> str:
        return f"run-{(i * 7919) % runs}"

    def same_kind(i: int, count: int) -> str:
        """``count`` runs of one kind (the fill makes every fifth a TrainJob): compare takes no mix."""
        n = (i * 7919) % (runs - 5 * count)
        return ",".join(f"run-{n + 5 * k}" for k in range(count))

    return {
        "list_first_page": lambda i: get("/api/v1/runs"),
        "list_next_pages": deep_page,
        "list_by_namespace": lambda i: get("/api/v1/runs", namespace=f"ns-{i % NAMESPACES}"),
        "list_failed_mpijobs": lambda i: get("/api/v1/runs", phase="Failed", kind="MPIJob"),
        "list_by_label": lambda i: get("/api/v1/runs", label=f"exp={i % 50}"),
        "list_by_absent_label": lambda i: get("/api/v1/runs", label=f"exp=absent-{i}"),
        "list_by_name_only": lambda i: get("/api/v1/runs", name=f"job-{i % JOB_NAMES}"),
        "list_by_time_range": lambda i: get(
            "/api/v1/runs",
            created_after="2000-01-01T00:00:00Z",
            created_before="2100-01-01T00:00:00Z",
            phase="Pending",
        ),
        "list_as_user_of_10_namespaces": lambda i: get("/api/v1/runs", headers=team),
        "attempts_of_one_job": lambda i: get(
            f"/api/v1/namespaces/ns-{i % NAMESPACES}/jobs/job-{i % NAMESPACES}/runs"
        ),
        "compare_2": lambda i: get("/api/v1/compare", runs=same_kind(i, 2)),
        "compare_5": lambda i: get("/api/v1/compare", runs=same_kind(i, 5)),
        "trends_last_20": lambda i: get(
            f"/api/v1/namespaces/ns-{i % NAMESPACES}/jobs/job-{i % NAMESPACES}/trends"
        ),
        "run_detail": lambda i: get(f"/api/v1/runs/{uid(i)}"),
    }


@contextlib.asynccontextmanager
async def filled_app(runs: int, name: str) -> AsyncIterator[tuple[httpx.AsyncClient, float]]:
    """A fresh embedded PostgreSQL, migrated and filled with ``runs`` runs (:func:`fill`), and the
    whole app in process over it (:data:`TOKENS`): a client of it and the seconds the fill took.
    One client sends thousands of requests: the per-token rate limit is what it does not measure."""
    with tempfile.TemporaryDirectory(prefix=f"mpijc-bench-{name}-") as tmp:
        postgres = EmbeddedPostgres(Path(tmp) / "postgres", free_port())
        postgres.start()
        try:
            url = f"postgresql://postgres@127.0.0.1:{postgres.port}/postgres"
            await migrate.upgrade_async(url)
            engine = make_engine(url, pool_size=5)
            try:
                fill_s = await fill(engine, runs)
                app = create_app(
                    engine,
                    PipelineMetrics(),
                    StaticAccess(TOKENS),
                    limits=replace(DEFAULT_LIMITS, per_token=None),
                )
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
                    yield client, fill_s
            finally:
                await engine.dispose()
        finally:
            postgres.stop()


async def timed_all(
    scenarios: Mapping[str, Scenario], repeat: int, warmup: int
) -> dict[str, dict[str, float]]:
    """Each scenario :func:`timed` in turn, one request at a time: its percentiles, by name."""
    return {name: await timed(call, repeat, warmup) for name, call in scenarios.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()

    async with filled_app(args.runs, "api") as (client, fill_s):
        results = await timed_all(scenarios(client, args.runs), args.repeat, args.warmup)
    worst = max(r["p95_ms"] for name, r in results.items() if name.startswith(("list", "compare")))
    report(
        "api",
        {
            "benchmark": "api",
            "stored": {"runs": args.runs, "pods": args.runs * 4, "pod_states": args.runs * 12},
            "fill_seconds": round(fill_s, 1),
            "repeat": args.repeat,
            "requests": results,
            "target_p95_ms": 50,
            "worst_list_or_compare_p95_ms": worst,
            "meets_target": worst < 50,
        },
    )


if __name__ == "__main__":
    asyncio.run(main())
