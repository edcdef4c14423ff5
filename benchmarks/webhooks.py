"""Webhooks benchmark: 1,000 subscribers on loopback, 10 % of them slow or dead.

Processes, all on this box: embedded PostgreSQL and NATS; the notify consumer + dispatcher
(``python -m benchmarks.webhooks notify``, wired as a consumer process wires it); one receiver
process serving every subscriber's path (plain asyncio HTTP/1.1, verifying every signature,
keeping arrival times); and this process, which creates the subscriptions through the API,
publishes ``JobObserved`` phase transitions to JetStream and measures.

Subscribers filter on a job name (100 names, 10 subscribers each, as pipelines watch their
jobs). The 100 bad ones (10 %) are two subscribers of each of jobs 50-99: half *slow* (answer
after 5 s; the request timeout is 2 s, so every attempt times out and is retried), half
*dead* (nothing listens). Measured on the healthy endpoints only:

- **throughput**: ``--runs`` runs of every job (created → running → succeeded) published at
  once; healthy deliveries per second from the first publish to the last arrival;
- **latency**: the same at a fixed offered rate (``--rate`` deliveries/s to healthy
  endpoints); per delivery, publish → arrival at the receiver, p50/p99, reported for all
  healthy endpoints and split into jobs whose subscribers are all healthy and jobs that
  share subscribers with bad endpoints — equal numbers mean the bad ones delay nobody.

Prints one JSON document and writes ``benchmarks/results/webhooks.json``.
Target (DESIGN.md): ≥ 500 deliveries/s; a slow or dead endpoint does not delay the others.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks.harness import report
from controller import migrate
from controller.bus import Publisher, connect, ensure_streams
from controller.db import make_engine
from controller.embedded import EmbeddedServices, free_port
from controller.events import JobObserved, JobRef
from controller.metrics import PipelineMetrics
from controller.settings import NatsSettings, Settings
from controller.subjects import Topology
from tests import eventbuilders as eb
from tests.notify_support import api_client, notify_running, offline_settings
from tests.webhook_receiver import Receiver, Reply

JOBS = 100
PER_JOB = 10
BAD_SLOTS = (2, 7)  # subscriber indexes that are bad, for jobs 50-99
HEALTHY = JOBS * PER_JOB - JOBS // 2 * len(BAD_SLOTS)
SLOW_REPLY_S = 5.0
NOTIFY_ENV = {
    "MPIJC_NOTIFY__ALLOW_CIDRS": '["127.0.0.0/8"]',
    "MPIJC_NOTIFY__REQUEST_TIMEOUT_S": "2",
    "MPIJC_NOTIFY__RETRY_SCHEDULE_S": "[1, 2, 4]",
    "MPIJC_NOTIFY__POLL_INTERVAL_S": "0.2",
    "MPIJC_NOTIFY__ENDPOINT_CONCURRENCY": "2",
    "MPIJC_NOTIFY__MAX_IN_FLIGHT": "512",
    "MPIJC_LOG_LEVEL": "ERROR",  # dead letters of the dead endpoints are expected, by the hundred
}


@dataclass(frozen=True)
class Subscriber:
    path: str
    job: str
    kind: str  # healthy | slow | dead
    url: str


def subscribers(receiver_port: int, dead_port: int) -> list[Subscriber]:
    out: list[Subscriber] = []
    for j in range(JOBS):
        for n in range(PER_JOB):
            kind = "healthy"
            if j >= JOBS // 2 and n in BAD_SLOTS:
                kind = "slow" if n == BAD_SLOTS[0] else "dead"
            path = f"{kind}/job-{j}/{n}"
            port = dead_port if kind == "dead" else receiver_port
            out.append(Subscriber(path, f"job-{j}", kind, f"http://127.0.0.1:{port}/{path}"))
    return out


# ------------------------------------------------------------------ receiver process


def _receive(port: int, secrets: dict[str, str], pipe: Connection) -> None:
    """Serve until told to stop, then send back (path, type, job uid, arrival, verified) per request."""

    def answer(path: str) -> Reply:
        return Reply(delay_s=SLOW_REPLY_S) if path.startswith("/slow/") else Reply()

    async def serve() -> list[tuple[str, str, str, float, bool]]:
        async with Receiver(answer=answer, port=port) as receiver:
            receiver.secrets = secrets
            pipe.send("ready")
            await asyncio.get_running_loop().run_in_executor(None, pipe.recv)
        return [
            (r.path, r.payload["type"], r.payload["data"]["job"]["uid"], r.at, r.verified)
            for r in receiver.requests
        ]

    pipe.send(asyncio.run(serve()))


# ------------------------------------------------------------------ notify process


async def _serve_notify() -> None:
    """The notify consumer and dispatcher until SIGTERM (settings from the environment)."""
    settings = Settings()
    logging.basicConfig(level=settings.log_level)
    assert settings.database.url and settings.nats.url
    topology = Topology(settings.nats.prefix)
    nc = await connect(settings.nats.url, "bench-notify")
    engine = make_engine(settings.database.url.get_secret_value(), pool_size=10)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with notify_running(settings, topology, nc.jetstream(), engine, PipelineMetrics()):
        await stop.wait()
    await engine.dispose()
    await nc.drain()


# ------------------------------------------------------------------ measuring


@dataclass
class Env:
    topology: Topology
    publisher: Publisher
    engine: Any
    settings: Settings


@contextlib.asynccontextmanager
async def services(data_dir: Path) -> AsyncIterator[tuple[Env, dict[str, str]]]:
    with EmbeddedServices(data_dir, free_port(), free_port(), None, None) as found:
        await migrate.upgrade_async(found.database_url)
        topology = Topology("bench")
        nc = await connect(found.nats_url, "bench")
        js = nc.jetstream()
        await ensure_streams(js, topology, NatsSettings())
        engine = make_engine(found.database_url)
        env = {
            "MPIJC_DATABASE__URL": found.database_url,
            "MPIJC_NATS__URL": found.nats_url,
            "MPIJC_NATS__PREFIX": topology.prefix,
            **NOTIFY_ENV,
        }
        settings = offline_settings()  # the API's view: loopback allowlisted, as for the receiver
        try:
            yield Env(topology, Publisher(js, topology), engine, settings), env
        finally:
            await engine.dispose()
            await nc.drain()


def runs(prefix: str, count: int) -> list[list[JobObserved]]:
    """``count`` runs of every job name: created → running → succeeded, one uid per run."""
    out: list[list[JobObserved]] = []
    for r in range(count):
        for j in range(JOBS):
            ref = JobRef(uid=f"{prefix}-{j}-{r}", kind="MPIJob", namespace="bench", name=f"job-{j}")
            now = datetime.now(UTC)
            out.append(
                [
                    eb.job("Pending", job=ref, change="ADDED", observed_at=now, created_at=now),
                    eb.job("Running", job=ref, observed_at=now, created_at=now),
                    eb.job("Succeeded", job=ref, observed_at=now, created_at=now),
                ]
            )
    return out


async def delivered(env: Env) -> int:
    async with env.engine.connect() as conn:
        found = await conn.execute(
            text(
                "SELECT count(*) FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id "
                "WHERE d.status = 'delivered' AND s.url NOT LIKE '%/slow/%' AND s.url NOT LIKE '%/dead/%'"
            )
        )
        return int(found.scalar_one())


async def until_delivered(env: Env, expected: int, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while await delivered(env) < expected:
        if time.monotonic() > deadline:
            async with env.engine.connect() as conn:
                states = (
                    await conn.execute(
                        text(
                            "SELECT split_part(s.url, '/', 4) AS kind, d.status, d.attempts, count(*) "
                            "FROM deliveries d JOIN subscriptions s ON s.id = d.subscription_id "
                            "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
                        )
                    )
                ).all()
                errors = (
                    await conn.execute(
                        text(
                            "SELECT split_part(s.url, '/', 4), a.outcome, left(a.error, 60), count(*) "
                            "FROM delivery_attempts a JOIN deliveries d ON d.seq = a.delivery_seq "
                            "JOIN subscriptions s ON s.id = d.subscription_id "
                            "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
                        )
                    )
                ).all()
            raise TimeoutError(f"only {await delivered(env)} of {expected} delivered: {states} {errors}")
        await asyncio.sleep(0.2)


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)


async def throughput(env: Env, count: int, published: dict[tuple[str, str], float]) -> dict[str, Any]:
    stories = runs("burst", count)
    before = await delivered(env)
    started = time.time()
    for story in stories:
        for event in story:
            published[(event.uid, _type(event))] = time.time()
    await env.publisher.publish([e for story in stories for e in story])
    await until_delivered(env, before + HEALTHY * count * 3)
    return {"runs": len(stories), "events": len(stories) * 3, "started": started}


async def latency(
    env: Env, rate: int, seconds: float, published: dict[tuple[str, str], float]
) -> dict[str, Any]:
    """Publish transitions so healthy endpoints are offered ``rate`` deliveries/s."""
    events_per_s = rate / (HEALTHY / JOBS)
    stories = runs(f"steady{rate}", max(1, int(events_per_s * seconds / 3 / JOBS) + 1))
    order = [event for step in range(3) for story in stories for event in story[step : step + 1]]
    before = await delivered(env)
    start = time.perf_counter()
    for n, event in enumerate(order):
        await asyncio.sleep(max(0.0, start + n / events_per_s - time.perf_counter()))
        published[(event.uid, _type(event))] = time.time()
        await env.publisher.publish([event])
    expected = sum(PER_JOB - (len(BAD_SLOTS) if int(e.name.split("-")[1]) >= JOBS // 2 else 0) for e in order)
    await until_delivered(env, before + expected)
    return {"offered_deliveries_per_s": rate, "events": len(order), "seconds": seconds}


def _type(event: JobObserved) -> str:
    return {"Pending": "job.created", "Running": "job.running", "Succeeded": "job.succeeded"}[event.phase]


Arrival = tuple[str, str, str, float, bool]  # path, event type, job uid, arrival time, verified
Key = tuple[str, str]  # job uid, event type


def summarize(
    arrivals: list[Arrival], published: dict[Key, float], enqueued: dict[Key, float], prefix: str
) -> dict[str, Any]:
    """Throughput and latencies of one phase (job uids starting with ``prefix``), healthy endpoints only."""
    healthy = [a for a in arrivals if a[0].startswith("/healthy/") and a[2].startswith(prefix)]

    def ms(a: Arrival) -> float:
        return (a[3] - published[(a[2], a[1])]) * 1000

    def job_index(a: Arrival) -> int:
        return int(a[0].split("/")[2].removeprefix("job-"))

    latencies = [ms(a) for a in healthy]
    keys = {(a[2], a[1]) for a in healthy}
    to_outbox = [(enqueued[k] - published[k]) * 1000 for k in keys if k in enqueued]
    first = min(published[(a[2], a[1])] for a in healthy)
    last = max(a[3] for a in healthy)
    return {
        "healthy_deliveries": len(healthy),
        "seconds": round(last - first, 2),
        "deliveries_per_s": round(len(healthy) / (last - first), 1),
        "verified": all(a[4] for a in healthy),
        "p50_ms": percentile(latencies, 0.5),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": round(max(latencies), 1),
        "p99_ms_jobs_with_only_healthy_subscribers": percentile(
            [ms(a) for a in healthy if job_index(a) < JOBS // 2], 0.99
        ),
        "p99_ms_jobs_sharing_subscribers_with_bad_ones": percentile(
            [ms(a) for a in healthy if job_index(a) >= JOBS // 2], 0.99
        ),
        "publish_to_outbox_p50_ms": percentile(to_outbox, 0.5),
        "publish_to_outbox_p99_ms": percentile(to_outbox, 0.99),
        "attempts_to_slow_endpoints": sum(
            1 for a in arrivals if a[0].startswith("/slow/") and a[2].startswith(prefix)
        ),
    }


async def enqueue_times(env: Env) -> dict[Key, float]:
    """When the consumer wrote each event's outbox rows."""
    async with env.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT job_uid, event_type, min(created_at) FROM deliveries GROUP BY 1, 2")
        )
        return {(uid, kind): at.timestamp() for uid, kind, at in rows}


async def main(args: argparse.Namespace) -> None:
    receiver_port, dead_port = free_port(), free_port()
    subs = subscribers(receiver_port, dead_port)
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-webhooks-") as tmp:
        async with services(Path(tmp)) as (env, process_env):
            metrics = PipelineMetrics()
            secrets: dict[str, str] = {}
            async with api_client(env.settings, env.engine, metrics) as api:
                for sub in subs:
                    created = await api.post(
                        "/api/v1/webhooks",
                        json={"url": sub.url, "namespace": "bench", "job_name": sub.job},
                    )
                    assert created.status_code == 201, created.text
                    secrets[sub.path] = created.json()["secret"]
            parent, child = multiprocessing.get_context("spawn").Pipe()
            receiver = multiprocessing.get_context("spawn").Process(
                target=_receive, args=(receiver_port, secrets, child), daemon=True
            )
            receiver.start()
            assert parent.recv() == "ready"
            notify = subprocess.Popen(  # noqa: ASYNC220 - started once, before any measurement
                [sys.executable, *_profiled(), "-m", "benchmarks.webhooks", "notify"],
                env={**os.environ, **process_env},
            )
            try:
                await asyncio.sleep(2.0)  # the notify process declares its durables
                published: dict[tuple[str, str], float] = {}
                await throughput(env, args.runs, published)
                for rate in args.rates:
                    await latency(env, rate, args.seconds, published)
                enqueued = await enqueue_times(env)
            finally:
                notify.send_signal(signal.SIGTERM)
                notify.wait(60)
                parent.send("stop")
                arrivals = parent.recv()
                receiver.join(10)
    bad = [s for s in subs if s.kind != "healthy"]
    result = {
        "benchmark": "webhooks",
        "path": "JobObserved → JetStream → notify consumer → PostgreSQL outbox → dispatcher → "
        "signed HTTP POST",
        "machine": "this box: embedded PostgreSQL + NATS, receiver and notify in their own processes, "
        f"{os.cpu_count()} cores",
        "subscribers": len(subs),
        "bad_subscribers": {
            "slow": sum(s.kind == "slow" for s in bad),
            "dead": sum(s.kind == "dead" for s in bad),
        },
        "settings": {
            k.removeprefix("MPIJC_NOTIFY__").lower(): v for k, v in NOTIFY_ENV.items() if "NOTIFY" in k
        },
        "throughput": summarize(arrivals, published, enqueued, "burst-"),
        "latency": [
            {"offered_deliveries_per_s": rate, **summarize(arrivals, published, enqueued, f"steady{rate}-")}
            for rate in args.rates
        ],
        "target": {"deliveries_per_s": 500, "slow_or_dead_endpoint_delays_others": False},
    }
    report("webhooks", result)


def _profiled() -> list[str]:
    """``BENCH_PROFILE=<file>`` runs the notify process under cProfile, writing to that file."""
    target = os.environ.get("BENCH_PROFILE")
    return ["-m", "cProfile", "-o", target] if target else []


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", nargs="?", default="bench", choices=["bench", "notify"])
    parser.add_argument("--runs", type=int, default=6, help="runs of each of the 100 jobs in the burst")
    parser.add_argument(
        "--rates",
        type=lambda text: [int(r) for r in text.split(",")],
        default=[250, 500],
        help="offered healthy deliveries/s of the latency runs, comma-separated",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the latency run")
    args = parser.parse_args()
    asyncio.run(_serve_notify() if args.role == "notify" else main(args))


if __name__ == "__main__":
    cli()
