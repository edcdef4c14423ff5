"""Webhooks benchmark: 1,000 subscribers on loopback, 10 % of them slow or dead.

Processes, all on this box, as ``deploy/`` runs them: embedded PostgreSQL and NATS; the notify
consumer (``mpijob-controller consume --only notify``) and ``--dispatchers`` dispatcher
processes (``consume --only dispatch``, woken by the consumer through PostgreSQL ``NOTIFY``);
one receiver process serving every subscriber's path (plain asyncio HTTP/1.1, verifying every
signature, keeping arrival times and counting arrivals, so the benchmark never queries the
database it measures); and this process, which creates the subscriptions through the API,
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
Targets (DESIGN.md): ≥ 500 deliveries/s; p99 watch event → delivery < 500 ms at 500/s; a slow or
dead endpoint does not delay the others.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from sqlalchemy import text

from benchmarks.harness import report
from controller import migrate
from controller.bus import Publisher, connect, ensure_streams
from controller.db import make_engine
from controller.embedded import EmbeddedServices, free_port
from controller.events import JobObserved, JobRef
from controller.metrics import PipelineMetrics
from controller.settings import NatsSettings, Settings
from controller.subjects import StreamFamily, Topology
from tests import eventbuilders as eb
from tests.notify_support import api_client, offline_settings
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
    """Serve and answer arrival counts until told to stop, then send back every request.

    Requests on the pipe: ``("count", prefix)`` → verified healthy deliveries (distinct
    ``webhook-id`` per path) of job uids starting with ``prefix``; ``"stop"`` → the list of
    (path, type, job uid, arrival, verified) per request.
    """

    def answer(path: str) -> Reply:
        return Reply(delay_s=SLOW_REPLY_S) if path.startswith("/slow/") else Reply()

    seen: set[tuple[str, str]] = set()
    per_phase: Counter[str] = Counter()  # "burst-", "steady500-": the uid's first part
    read = 0

    def arrived(receiver: Receiver, prefix: str) -> int:
        nonlocal read
        for r in receiver.requests[read:]:
            if r.path.startswith("/healthy/") and r.verified and (r.path, r.webhook_id) not in seen:
                seen.add((r.path, r.webhook_id))
                per_phase[r.payload["data"]["job"]["uid"].split("-")[0] + "-"] += 1
        read = len(receiver.requests)
        return per_phase[prefix]

    async def serve() -> list[tuple[str, str, str, float, bool]]:
        loop = asyncio.get_running_loop()
        async with Receiver(answer=answer, port=port) as receiver:
            receiver.secrets = secrets
            pipe.send("ready")
            while (request := await loop.run_in_executor(None, pipe.recv)) != "stop":
                pipe.send(arrived(receiver, request[1]))
        return [
            (r.path, r.payload["type"], r.payload["data"]["job"]["uid"], r.at, r.verified)
            for r in receiver.requests
        ]

    pipe.send(asyncio.run(serve()))


# ------------------------------------------------------------------ controller processes


def start_controller(roles: Sequence[str], env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    """``mpijob-controller consume --only <role>`` per role, each with its own metrics port."""
    started = []
    for n, role in enumerate(roles):
        command = [
            sys.executable,
            *_profiled(f"{role}{n}"),
            "-m",
            "controller.cli",
            "consume",
            "--only",
            role,
        ]
        started.append(
            subprocess.Popen(command, env={**os.environ, **env, "MPIJC_API__METRICS_PORT": str(free_port())})
        )
    return started


# ------------------------------------------------------------------ measuring


@dataclass
class Env:
    topology: Topology
    js: JetStreamContext
    publisher: Publisher
    engine: Any
    settings: Settings
    receiver: Connection | None = None
    """The pipe to the receiver process (arrival counts)."""

    def arrived(self, prefix: str) -> int:
        """Verified healthy deliveries of the job uids starting with ``prefix`` so far."""
        assert self.receiver is not None
        self.receiver.send(("count", prefix))
        count: int = self.receiver.recv()
        return count


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
            yield Env(topology, js, Publisher(js, topology), engine, settings), env
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


async def until_arrived(env: Env, prefix: str, expected: int, timeout_s: float = 300) -> None:
    """Wait until the receiver has ``expected`` healthy deliveries of ``prefix``; explain a timeout."""
    deadline = time.monotonic() + timeout_s
    while env.arrived(prefix) < expected:
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
            raise TimeoutError(f"only {env.arrived(prefix)} of {expected} arrived; outbox: {states}")
        await asyncio.sleep(0.1)


_NOTIFY_DURABLES: tuple[tuple[StreamFamily, str], ...] = (("jobs", "notify"), ("findings", "notify-findings"))


async def until_ready(env: Env, dispatchers: int, timeout_s: float = 60) -> None:
    """Wait until the notify consumer's durables exist and every dispatcher listens for wake-ups."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        async with env.engine.connect() as conn:
            listening = (
                await conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN %'"))
            ).scalar_one()
        try:
            durables: tuple[tuple[StreamFamily, str], ...] = (
                ("jobs", "notify"),
                ("findings", "notify-findings"),
            )
            for family, durable in durables:
                await env.js.consumer_info(env.topology.stream(family), env.topology.durable(durable))
        except NotFoundError:
            pass
        else:
            if listening >= dispatchers:
                return
        await asyncio.sleep(0.2)
    raise TimeoutError("the notify consumer or the dispatchers did not start")


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)


async def throughput(env: Env, count: int, published: dict[tuple[str, str], float]) -> dict[str, Any]:
    stories = runs("burst", count)
    started = time.time()
    for story in stories:
        for event in story:
            published[(event.uid, _type(event))] = time.time()
    await env.publisher.publish([e for story in stories for e in story])
    await until_arrived(env, "burst-", HEALTHY * count * 3)
    return {"runs": len(stories), "events": len(stories) * 3, "started": started}


async def latency(
    env: Env, rate: int, seconds: float, published: dict[tuple[str, str], float]
) -> dict[str, Any]:
    """Publish transitions so healthy endpoints are offered ``rate`` deliveries/s."""
    events_per_s = rate / (HEALTHY / JOBS)
    stories = runs(f"steady{rate}", max(1, int(events_per_s * seconds / 3 / JOBS) + 1))
    order = [event for step in range(3) for story in stories for event in story[step : step + 1]]
    start = time.perf_counter()
    for n, event in enumerate(order):
        await asyncio.sleep(max(0.0, start + n / events_per_s - time.perf_counter()))
        published[(event.uid, _type(event))] = time.time()
        await env.publisher.publish([event])
    expected = sum(PER_JOB - (len(BAD_SLOTS) if int(e.name.split("-")[1]) >= JOBS // 2 else 0) for e in order)
    await until_arrived(env, f"steady{rate}-", expected)
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
            env.receiver = parent
            controller = start_controller(["notify"] + ["dispatch"] * args.dispatchers, process_env)
            try:
                await until_ready(env, args.dispatchers)
                published: dict[tuple[str, str], float] = {}
                await throughput(env, args.runs, published)
                for rate in args.rates:
                    await latency(env, rate, args.seconds, published)
                enqueued = await enqueue_times(env)
            finally:
                for process in controller:
                    process.send_signal(signal.SIGTERM)
                for process in controller:
                    process.wait(60)
                parent.send("stop")
                arrivals = parent.recv()
                receiver.join(10)
    bad = [s for s in subs if s.kind != "healthy"]
    result = {
        "benchmark": "webhooks",
        "path": "JobObserved → JetStream → notify consumer → PostgreSQL outbox → dispatchers → "
        "signed HTTP POST",
        "machine": "this box: embedded PostgreSQL + NATS, the receiver, the notify consumer and each "
        f"dispatcher in a process of its own, {os.cpu_count()} cores",
        "dispatchers": args.dispatchers,
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
        "target": {
            "deliveries_per_s": 500,
            "p99_ms_at_500_per_s": 500,
            "slow_or_dead_endpoint_delays_others": False,
        },
    }
    report("webhooks", result)


def _profiled(name: str) -> list[str]:
    """``BENCH_PROFILE=<prefix>`` runs each controller process under cProfile, into ``<prefix>.<name>``."""
    prefix = os.environ.get("BENCH_PROFILE")
    return ["-m", "cProfile", "-o", f"{prefix}.{name}"] if prefix else []


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="runs of each of the 100 jobs in the burst")
    parser.add_argument(
        "--rates",
        type=lambda text: [int(r) for r in text.split(",")],
        default=[250, 500],
        help="offered healthy deliveries/s of the latency runs, comma-separated",
    )
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the latency run")
    parser.add_argument("--dispatchers", type=int, default=2, help="dispatcher processes (deploy/ runs two)")
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
