"""Webhooks benchmark: 1,000 subscribers on loopback, 10 % of them slow or dead.

Processes, all on this box, as ``deploy/`` runs them: embedded PostgreSQL and NATS; the notify
consumer (``mpijob-controller consume --only notify``) and ``--dispatchers`` dispatcher
processes (``consume --only dispatch``, woken by the consumer through PostgreSQL ``NOTIFY``);
one receiver process serving every subscriber's path (plain asyncio HTTP/1.1, verifying every
signature, keeping arrival times and counting arrivals, so the benchmark never queries the
database it measures); and this process, which creates the subscriptions through the API,
feeds the watcher pipeline (or, for the burst, publishes to JetStream) and measures.

Subscribers filter on a job name (100 names, 10 subscribers each, as pipelines watch their
jobs). The 100 bad ones (10 %) are two subscribers of each of jobs 50-99: half *slow* (answer
after 5 s; the request timeout is 2 s, so every attempt times out and is retried), half
*dead* (nothing listens). Measured on the healthy endpoints only:

- **throughput**: ``--runs`` runs of every job (created → running → succeeded) published to
  JetStream at once; healthy deliveries per second from the first publish to the last arrival;
- **latency**: ``--events-per-s`` Kubernetes watch events per second (real MPIJob and pod
  objects) fed to the watcher pipeline in 10 ms ticks: MPIJob transitions enough to offer the
  healthy endpoints each of ``--rates`` deliveries/s, pod updates of 100 other running jobs
  the rest; per delivery, watch event → arrival at the receiver, p50/p99, reported for all
  healthy endpoints and split into jobs whose subscribers are all healthy and jobs that
  share subscribers with bad endpoints — equal numbers mean the bad ones delay nobody.

First, in the same run and to the same receiver, while the pipeline is idle, a **reference**:
as many signed POSTs as the burst delivers, sent by this one process as directly as it can
(:func:`reference_sender`) with the dispatcher's HTTP client, aiohttp; ``ratio`` is the burst's
deliveries/s over the reference's. Then the same with httpx (``reference_httpx``, the
dispatcher's client before issue 40), to compare with earlier figures. Every
phase also says what a delivery cost: CPU milliseconds of each process group (dispatchers,
notify consumer, receiver, PostgreSQL, this process), PostgreSQL transactions and the outbox's
row writes (rows inserted, updated, updated HOT — without an index entry —, attempts logged),
figures a busy box distorts far less than rates.

``--format cloudevents`` (or ``cloudevents-structured``) subscribes every endpoint to CloudEvents
instead, to compare with standard webhooks run for run. ``--formats standard,cloudevents,…``
compares them within one run instead: the same burst, once per format listed and in that order,
through the same subscriptions, whose format is switched between bursts (the dispatchers read
a subscription's format at each claim); interleave them (``standard,cloudevents,standard,
cloudevents``) so that a box getting busier does not favour one. The latency runs are left out
(``--rates`` is ignored).

Prints one JSON document and writes ``benchmarks/results/webhooks.json``
(``webhooks-<format>.json`` for a CloudEvents run, ``webhooks-formats.json`` for ``--formats``).
Targets (docs/architecture.md): ≥ 500 deliveries/s; p99 watch event → webhook delivered < 500 ms at 500
watch events/s; a slow or dead endpoint does not delay the others.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import ssl
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from sqlalchemy import text

from benchmarks.harness import Bench, CpuMeter, pipeline_services, report, running_mpijobs
from controller.bus.publishing import Publisher
from controller.contract.cloudevents import FORMATS, TYPE_PREFIX
from controller.contract.events import JobObserved, JobRef
from controller.contract.settings import default_dispatchers
from controller.contract.signing import signed_headers
from controller.metrics import PipelineMetrics
from controller.testing import events as eb
from controller.testing import objects as k
from controller.testing.notify import api_client, offline_settings
from controller.testing.ports import free_port
from controller.testing.receivers import Received, Receiver, Reply
from watchers.correlating import Observation
from watchers.pipeline import Pipeline

JOBS = 100
PER_JOB = 10
BAD_SLOTS = (2, 7)  # subscriber indexes that are bad, for jobs 50-99
HEALTHY = JOBS * PER_JOB - JOBS // 2 * len(BAD_SLOTS)
SLOW_REPLY_S = 5.0
MAX_IN_FLIGHT = 512
OUTBOX_WRITES = text(
    "SELECT coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'deliveries'), 0) AS inserts,"
    " coalesce(sum(n_tup_upd) FILTER (WHERE relname = 'deliveries'), 0) AS updates,"
    " coalesce(sum(n_tup_hot_upd) FILTER (WHERE relname = 'deliveries'), 0) AS hot_updates,"
    " coalesce(sum(n_tup_ins) FILTER (WHERE relname = 'delivery_attempts'), 0) AS attempts_logged"
    " FROM pg_stat_user_tables WHERE relname IN ('deliveries', 'delivery_attempts')"
)
"""SQL: rows inserted into and updated in the outbox, updates that were HOT, attempts logged."""
STATS_FLUSH_S = 1.5
"""PostgreSQL's backends report table statistics at most once a second."""
NOTIFY_ENV = {
    "MPIJC_NOTIFY__ALLOW_CIDRS": '["127.0.0.0/8"]',
    "MPIJC_NOTIFY__REQUEST_TIMEOUT_S": "2",
    "MPIJC_NOTIFY__RETRY_SCHEDULE_S": "[1, 2, 4]",
    "MPIJC_NOTIFY__POLL_INTERVAL_S": "0.2",
    "MPIJC_NOTIFY__ENDPOINT_CONCURRENCY": "2",
    "MPIJC_NOTIFY__MAX_IN_FLIGHT": str(MAX_IN_FLIGHT),
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


def _type_uid(r: Received) -> tuple[str, str]:
    """The event type and job uid of a delivery in any format (standard, CloudEvents binary or
    structured)."""
    body = r.payload
    if "ce-type" in r.headers:
        return r.headers["ce-type"].removeprefix(TYPE_PREFIX), body["job"]["uid"]
    if "specversion" in body:
        return body["type"].removeprefix(TYPE_PREFIX), body["data"]["job"]["uid"]
    return body["type"], body["data"]["job"]["uid"]


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
                per_phase[_type_uid(r)[1].split("-")[0] + "-"] += 1
        read = len(receiver.requests)
        return per_phase[prefix]

    async def serve() -> list[tuple[str, str, str, float, bool]]:
        loop = asyncio.get_running_loop()
        async with Receiver(answer=answer, port=port) as receiver:
            receiver.secrets = secrets
            pipe.send("ready")
            while (request := await loop.run_in_executor(None, pipe.recv)) != "stop":
                pipe.send(arrived(receiver, request[1]))
        return [(r.path, *_type_uid(r), r.at, r.verified) for r in receiver.requests]

    pipe.send(asyncio.run(serve()))


# ------------------------------------------------------------------ measuring


@dataclass
class Env:
    bench: Bench
    publisher: Publisher
    receiver: Connection
    """The pipe to the receiver process (arrival counts)."""
    meter: CpuMeter
    spent: dict[str, tuple[dict[str, float], int]] = field(default_factory=dict)
    """CPU seconds by process group and PostgreSQL transactions of each phase, by job uid prefix."""
    written: dict[str, dict[str, int]] = field(default_factory=dict)
    """Row writes to the outbox of each phase (:data:`OUTBOX_WRITES`), by job uid prefix."""

    @contextlib.asynccontextmanager
    async def measured(self, prefix: str) -> AsyncIterator[None]:
        """Record the CPU, transactions and outbox writes the phase of job uids ``prefix`` costs."""
        cpu, transactions, rows = self.meter.read(), await self.bench.transactions(), await self.writes()
        yield
        after, done = self.meter.read(), await self.bench.transactions()
        self.spent[prefix] = ({k: after[k] - cpu[k] for k in after}, done - transactions)
        await asyncio.sleep(STATS_FLUSH_S)  # the last settles, and their statistics
        self.written[prefix] = {k: v - rows[k] for k, v in (await self.writes()).items()}

    async def writes(self) -> dict[str, int]:
        """The outbox's row writes so far (PostgreSQL's table statistics)."""
        async with self.bench.engine.connect() as conn:
            row = (await conn.execute(OUTBOX_WRITES)).one()
            return {k: int(v) for k, v in row._mapping.items()}

    def cost(self, prefix: str, deliveries: int) -> dict[str, Any]:
        """What one delivery of the phase cost: CPU ms by process group, PostgreSQL transactions,
        writes to the outbox's rows (updates that were HOT: no index entry written)."""
        cpu, transactions = self.spent[prefix]
        zero = dict.fromkeys(cpu, 0.0)
        written = self.written.get(prefix, {})
        return {
            "cpu_ms_per_delivery": CpuMeter.per(zero, cpu, deliveries),
            "postgres_transactions_per_delivery": round(transactions / max(deliveries, 1), 2),
            "outbox_writes_per_delivery": {k: round(v / max(deliveries, 1), 2) for k, v in written.items()},
        }

    def arrived(self, prefix: str) -> int:
        """Verified healthy deliveries of the job uids starting with ``prefix`` so far."""
        self.receiver.send(("count", prefix))
        count: int = self.receiver.recv()
        return count


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
            async with env.bench.engine.connect() as conn:
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


REFERENCE_CLIENTS = {"aiohttp": "reference", "httpx": "refhttpx"}
"""The reference's HTTP clients, and the job uid prefix of each one's sends: ``aiohttp`` sends as
the dispatcher does; ``httpx``, the dispatcher's client until issue 40, is kept to compare."""


async def reference_sender(
    env: Env, subs: Sequence[Subscriber], secrets: dict[str, str], count: int, in_flight: int, client: str
) -> dict[str, float]:
    """The least one process can do per delivery, to the same receiver: ``count`` signed POSTs
    round the healthy subscribers, ``in_flight`` at once, each endpoint through its own pool
    of ``MPIJC_NOTIFY__ENDPOINT_CONCURRENCY`` connections (``client``: ``aiohttp`` sessions, as
    the dispatcher sends them, or ``httpx`` transports) — no bus, no database, no retries."""
    healthy = [s for s in subs if s.kind == "healthy"]
    connections = int(NOTIFY_ENV["MPIJC_NOTIFY__ENDPOINT_CONCURRENCY"])
    tls = ssl.create_default_context()  # loaded once, as the dispatcher does
    prefix = REFERENCE_CLIENTS[client]
    slots = asyncio.Semaphore(in_flight)
    pools: dict[str, httpx.AsyncHTTPTransport] = {}
    sessions: dict[str, aiohttp.ClientSession] = {}
    for s in healthy:
        if client == "httpx":
            pools[s.path] = httpx.AsyncHTTPTransport(
                verify=tls, limits=httpx.Limits(max_connections=connections)
            )
        else:
            sessions[s.path] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=connections, ssl=tls)
            )

    async def send(n: int) -> None:
        sub = healthy[n % len(healthy)]
        body = json.dumps(
            {
                "type": "job.succeeded",
                "timestamp": datetime.now(UTC).isoformat(),
                "data": {"job": {"uid": f"{prefix}-{n}", "namespace": "bench", "name": sub.job}},
            }
        ).encode()
        headers = {
            "content-type": "application/json",
            **signed_headers([secrets[sub.path]], f"{prefix}_{n}", body),  # distinct ids per client
        }
        async with slots:
            if client == "httpx":
                response = await pools[sub.path].handle_async_request(
                    httpx.Request("POST", sub.url, content=body, headers=headers)
                )
                await response.aread()
                await response.aclose()
            else:
                async with sessions[sub.path].post(sub.url, data=body, headers=headers) as answer:
                    await answer.read()

    started = time.monotonic()
    try:
        async with env.measured(f"{prefix}-"):
            await asyncio.gather(*(send(n) for n in range(count)))
            await until_arrived(env, f"{prefix}-", count)
    finally:
        await asyncio.gather(*(pool.aclose() for pool in pools.values()))
        await asyncio.gather(*(session.close() for session in sessions.values()))
    seconds = time.monotonic() - started
    return {
        "client": client,
        "deliveries": count,
        "seconds": round(seconds, 2),
        "deliveries_per_s": round(count / seconds, 1),
        **env.cost(f"{prefix}-", count),
    }


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * q))], 1)


async def throughput(
    env: Env, count: int, published: dict[tuple[str, str], float], prefix: str = "burst"
) -> dict[str, Any]:
    """``count`` runs of every job published to JetStream at once (job uids ``<prefix>-…``; no
    ``-`` in ``prefix``), until every healthy delivery arrived."""
    stories = runs(prefix, count)
    started = time.time()
    for story in stories:
        for event in story:
            published[(event.uid, _type(event))] = time.time()
    async with env.measured(f"{prefix}-"):
        await env.publisher.publish([e for story in stories for e in story])
        await until_arrived(env, f"{prefix}-", HEALTHY * count * 3)
    return {"runs": len(stories), "events": len(stories) * 3, "started": started}


async def switch_format(env: Env, fmt: str) -> None:
    """Every subscription's format, from the next claim on (a benchmark's setup, not measured)."""
    async with env.bench.engine.begin() as conn:
        await conn.execute(text("UPDATE subscriptions SET format = :fmt"), {"fmt": fmt})


async def format_bursts(env: Env, formats: Sequence[str], count: int, published: dict[Key, float]) -> None:
    """The same burst once per entry of ``formats``, in order (job uids ``burst<i>-…``)."""
    for n, fmt in enumerate(formats):
        await switch_format(env, fmt)
        await throughput(env, count, published, f"burst{n}")


def by_format(
    formats: Sequence[str], arrivals: list[Arrival], published: dict[Key, float], enqueued: dict[Key, float]
) -> dict[str, Any]:
    """Each burst of :func:`format_bursts`, and per format the median of its bursts' deliveries/s,
    also as a ratio to standard webhooks' (when they were run)."""
    bursts = [
        {"format": fmt, **summarize(arrivals, published, enqueued, f"burst{n}-")}
        for n, fmt in enumerate(formats)
    ]
    medians = {
        fmt: statistics.median(b["deliveries_per_s"] for b in bursts if b["format"] == fmt)
        for fmt in dict.fromkeys(formats)
    }
    standard = medians.get("standard")
    return {
        "bursts": bursts,
        "median_deliveries_per_s": medians,
        "ratio_to_standard": {f: round(v / standard, 2) for f, v in medians.items()} if standard else None,
    }


def job_transitions(prefix: str, count: int) -> list[list[k.Obj]]:
    """``count`` runs of every job as the MPIJob objects a watch sees: created, running, succeeded."""
    out: list[list[k.Obj]] = []
    for r in range(count):
        for j in range(JOBS):
            created = k.mpijob(f"job-{j}", namespace="bench", uid=f"{prefix}-{j}-{r}")
            running = k.with_conditions(created, ("Running", "MPIJobRunning", "2026-11-23T10:00:20Z"))
            done = k.with_conditions(running, ("Succeeded", "MPIJobSucceeded", "2026-11-23T11:00:00Z"))
            out.append([created, running, done])
    return out


def running_pods(jobs: int) -> tuple[list[Observation], list[k.Obj]]:
    """Background: ``jobs`` running MPIJobs nobody subscribed to, and their launcher and worker pods."""
    return running_mpijobs(jobs, "noise", "noise", "2026-11-23T10:00:20Z", {"running": {}})


async def watched(
    env: Env,
    pipeline: Pipeline,
    pods: list[k.Obj],
    rate: int,
    events_per_s: int,
    seconds: float,
    entered: dict[Key, float],
) -> dict[str, Any]:
    """``events_per_s`` watch events into the watcher pipeline, of which job transitions enough to
    offer healthy endpoints ``rate`` deliveries/s and pod updates the rest; in 10 ms ticks."""
    transitions_per_s = rate / (HEALTHY / JOBS)
    stories = job_transitions(f"steady{rate}", max(1, int(transitions_per_s * seconds / 3 / JOBS) + 1))
    order = [(step, story[step]) for step in range(3) for story in stories]
    pods_per_tick = max(0, round((events_per_s - transitions_per_s) / 100))
    async with env.measured(f"steady{rate}-"):
        start, tick, sent = time.perf_counter(), 0, 0
        while sent < len(order):
            await asyncio.sleep(max(0.0, start + tick / 100 - time.perf_counter()))
            due = min(len(order), int((tick + 1) / 100 * transitions_per_s))
            chunk = [
                Observation(
                    "pod",
                    "MODIFIED",
                    k.with_container_state(
                        pods[(tick * pods_per_tick + i) % len(pods)],
                        {"running": {}},
                        phase="Running",
                        ready=True,
                    ),
                    datetime.now(UTC),
                )
                for i in range(pods_per_tick)
            ]
            for step, job in order[sent:due]:
                entered[(job["metadata"]["uid"], STEPS[step])] = time.time()
                chunk.append(Observation("job", "ADDED" if step == 0 else "MODIFIED", job, datetime.now(UTC)))
            sent = due
            await pipeline.feed(chunk)
            tick += 1
        expected = sum(healthy_of(int(job["metadata"]["name"].split("-")[1])) for _, job in order)
        await until_arrived(env, f"steady{rate}-", expected)
    return {"offered_deliveries_per_s": rate, "transitions": len(order), "seconds": seconds}


def healthy_of(job_index: int) -> int:
    """Healthy subscribers of job ``job_index``."""
    return PER_JOB - (len(BAD_SLOTS) if job_index >= JOBS // 2 else 0)


STEPS = ("job.created", "job.running", "job.succeeded")


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
        "entry_to_outbox_p50_ms": percentile(to_outbox, 0.5),
        "entry_to_outbox_p99_ms": percentile(to_outbox, 0.99),
        "attempts_to_slow_endpoints": sum(
            1 for a in arrivals if a[0].startswith("/slow/") and a[2].startswith(prefix)
        ),
    }


async def enqueue_times(env: Env) -> dict[Key, float]:
    """When the consumer wrote each event's outbox rows."""
    async with env.bench.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT job_uid, event_type, min(created_at) FROM deliveries GROUP BY 1, 2")
        )
        return {(uid, kind): at.timestamp() for uid, kind, at in rows}


async def subscribe_all(bench: Bench, subs: Sequence[Subscriber], fmt: str = "standard") -> dict[str, str]:
    """Create every subscription (in format ``fmt``) through the API; returns each path's signing secret."""
    secrets: dict[str, str] = {}
    # the API's view: loopback allowlisted, as for the receiver; one tenant owns all 1,000
    settings = offline_settings(
        max_subscriptions_per_user=len(subs), max_subscriptions_per_namespace=len(subs)
    )
    async with api_client(settings, bench.engine, PipelineMetrics()) as api:
        for sub in subs:
            created = await api.post(
                "/api/v1/webhooks",
                json={"url": sub.url, "namespace": "bench", "job_name": sub.job, "format": fmt},
            )
            assert created.status_code == 201, created.text
            secrets[sub.path] = created.json()["secret"]
    return secrets


async def main(args: argparse.Namespace) -> None:
    receiver_port, dead_port = free_port(), free_port()
    subs = subscribers(receiver_port, dead_port)
    roles = ["notify"] + ["dispatch"] * args.dispatchers
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-webhooks-") as tmp:
        async with pipeline_services(Path(tmp), roles, NOTIFY_ENV) as bench:
            formats = args.formats or [args.format]
            secrets = await subscribe_all(bench, subs, formats[0])
            parent, child = multiprocessing.get_context("spawn").Pipe()
            receiver = multiprocessing.get_context("spawn").Process(
                target=_receive, args=(receiver_port, secrets, child), daemon=True
            )
            receiver.start()
            assert parent.recv() == "ready"
            groups = {
                "dispatchers": bench.pids.get("dispatch", []),
                "notify_consumer": bench.pids.get("notify", []),
                "receiver": [receiver.pid] if receiver.pid else [],
            }
            meter = CpuMeter(groups, bench.data_dir / "postgres")
            env = Env(bench, Publisher(bench.js, bench.topology), parent, meter)
            pipeline = Pipeline(env.publisher.publish, bench.metrics, 30)
            try:
                # first, while the pipeline is idle: run last, it shared the box with the dispatchers
                # still retrying the slow and dead endpoints, the more of them the slower it went
                sends = HEALTHY * args.runs * 3
                reference = await reference_sender(env, subs, secrets, sends, MAX_IN_FLIGHT, "aiohttp")
                reference_httpx = await reference_sender(env, subs, secrets, sends, MAX_IN_FLIGHT, "httpx")
                published: dict[Key, float] = {}
                if args.formats:
                    await format_bursts(env, args.formats, args.runs, published)
                else:
                    await throughput(env, args.runs, published)
                    setup, pods = running_pods(JOBS)
                    await pipeline.feed(setup)
                    for rate in args.rates:
                        await watched(env, pipeline, pods, rate, args.events_per_s, args.seconds, published)
                enqueued = await enqueue_times(env)
            finally:
                parent.send("stop")
                arrivals = parent.recv()
                receiver.join(10)
    bad = [s for s in subs if s.kind != "healthy"]
    if args.formats:
        compared = by_format(args.formats, arrivals, published, enqueued)
        for n, one in enumerate(compared["bursts"]):
            one.update(env.cost(f"burst{n}-", one["healthy_deliveries"]))
        best = max(b["deliveries_per_s"] for b in compared["bursts"])
        report(
            "webhooks-formats",
            {
                "benchmark": "webhooks-formats",
                "path": "JetStream → notify consumer → PostgreSQL outbox → dispatchers → signed HTTP POST, "
                "the same burst once per format through the same 1,000 subscriptions",
                "machine": f"this box, {os.cpu_count()} cores, as the webhooks benchmark",
                "dispatchers": args.dispatchers,
                "formats": args.formats,
                **compared,
                "reference": reference,
                "reference_httpx": reference_httpx,
                "ratio_of_the_fastest_burst_to_the_reference": round(best / reference["deliveries_per_s"], 2),
                "ratio_of_the_fastest_burst_to_the_httpx_reference": round(
                    best / reference_httpx["deliveries_per_s"], 2
                ),
            },
        )
        return
    burst = summarize(arrivals, published, enqueued, "burst-")
    burst.update(env.cost("burst-", burst["healthy_deliveries"]))
    result = {
        "benchmark": "webhooks",
        "path": "watch event → watcher pipeline → JetStream → notify consumer → PostgreSQL outbox → "
        "dispatchers → signed HTTP POST (the burst enters at JetStream)",
        "machine": "this box: embedded PostgreSQL + NATS, the receiver, the notify consumer and each "
        f"dispatcher in a process of its own, {os.cpu_count()} cores",
        "dispatchers": args.dispatchers,
        "subscribers": len(subs),
        "bad_subscribers": {
            "slow": sum(s.kind == "slow" for s in bad),
            "dead": sum(s.kind == "dead" for s in bad),
        },
        "settings": {
            key.removeprefix("MPIJC_NOTIFY__").lower(): v for key, v in NOTIFY_ENV.items() if "NOTIFY" in key
        },
        "throughput": burst,
        "reference": reference,
        "reference_httpx": reference_httpx,
        "ratio": round(burst["deliveries_per_s"] / reference["deliveries_per_s"], 2),
        "ratio_to_the_httpx_reference": round(
            burst["deliveries_per_s"] / reference_httpx["deliveries_per_s"], 2
        ),
        "latency": [
            {
                "offered_deliveries_per_s": rate,
                "watch_events_per_s": args.events_per_s,
                **(steady := summarize(arrivals, published, enqueued, f"steady{rate}-")),
                **env.cost(f"steady{rate}-", steady["healthy_deliveries"]),
            }
            for rate in args.rates
        ],
        "target": {
            "deliveries_per_s": 500,
            "p99_ms_at_500_watch_events_per_s": 500,
            "slow_or_dead_endpoint_delays_others": False,
        },
    }
    result["format"] = args.format
    report("webhooks" if args.format == "standard" else f"webhooks-{args.format}", result)


def _formats(text: str) -> list[str]:
    formats = text.split(",")
    if not formats or any(f not in FORMATS for f in formats):
        raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of {', '.join(FORMATS)}")
    return formats


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
    parser.add_argument("--events-per-s", type=int, default=500, help="watch events/s in latency runs")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="standard",
        help="what every subscription receives (CloudEvents binary or structured mode next to standard)",
    )
    parser.add_argument(
        "--formats",
        type=_formats,
        help="compare formats within one run: the same burst once per format listed, in order "
        "(e.g. standard,cloudevents,standard,cloudevents); no latency runs",
    )
    parser.add_argument(
        "--dispatchers",
        type=int,
        default=default_dispatchers(os.cpu_count()),
        help="dispatcher processes (default: as many as up runs on this machine)",
    )
    asyncio.run(main(parser.parse_args()))


if __name__ == "__main__":
    cli()
