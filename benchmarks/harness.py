"""Shared benchmark harness: the embedded services and consumer processes, as deployed, and a
real Prometheus scraping the test exporter.

Each consumer runs as its own ``mpijob-controller consume --only NAME`` process (history
scales out, rules is a single replica, dispatchers as many as asked), the watcher side runs in
the benchmark process. ``BENCH_PROFILE=<prefix>`` runs each consumer process under cProfile,
writing ``<prefix>.<name><n>``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.streams import connect, ensure_streams
from controller.cli.collecting import pace_collector
from controller.cli.embedded import EmbeddedServices, die_with_this_process, end_child
from controller.contract.settings import NatsSettings
from controller.contract.subjects import (
    AUDIT_LIFECYCLE_DURABLE,
    HISTORY_DURABLE,
    NOTIFY_DURABLE,
    RULES_DURABLE,
    Topology,
)
from controller.metrics import PipelineMetrics
from controller.store import migrate
from controller.store.engine import make_engine
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.prometheus import Prometheus, UsageExporter, prometheus_binary
from watchers.correlating import Observation

RESULTS = Path(__file__).resolve().parent / "results"

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")


def proc_stat(pid: int | str) -> tuple[int, float]:
    """A process's parent pid and CPU seconds so far (user + system), from ``/proc/<pid>/stat``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_s(pid: int | str) -> float:
    """CPU seconds a process has used so far (user + system)."""
    return proc_stat(pid)[1]


def rss_mib(pid: int) -> float:
    """A process's resident memory now, in MiB (``/proc/<pid>/statm``)."""
    return round(int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE / (1 << 20), 1)


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident memory so far, in MiB (``VmHWM`` of ``/proc/<pid>/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
"""A client connection opened on a served process."""


async def connection_states(connections: Sequence[Connection | None]) -> dict[str, int]:
    """How many of ``connections`` the server holds open, and how it answered the others (by
    status; "closed": closed unanswered, "refused": ``None``, closed before the handshake ended)."""

    async def state(connection: Connection | None) -> str:
        if connection is None:
            return "refused"
        reader, _ = connection
        answer = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(65536), 0.05):
                answer += chunk
        except TimeoutError:
            return "open"
        except (ConnectionError, ssl.SSLError):
            pass
        return answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "closed"

    counted = collections.Counter(await asyncio.gather(*(state(c) for c in connections)))
    return dict(sorted(counted.items()))


def close_all(connections: Sequence[Connection | None]) -> None:
    """Close every opened one of ``connections``."""
    for connection in connections:
        if connection is not None:
            connection[1].close()


async def held_past_deadline(
    server: ServedProcess,
    count: int,
    open_them: Callable[[], Awaitable[Sequence[Connection | None]]],
    deadline_s: float,
    wait_s: float,
    meanwhile: Callable[[], Awaitable[object]] | None = None,
) -> dict[str, Any]:
    """``count`` connections ``open_them`` opens, held: the server's memory before, and while they
    are held with their states (and what ``meanwhile`` got then), then both again ``wait_s`` later,
    past their ``deadline_s``."""
    before = server.rss_mib()
    connections = await open_them()
    await asyncio.sleep(1.0)  # the server reads what was sent
    rss = server.rss_mib()
    result: dict[str, Any] = {
        "connections": count,
        "rss_before_mib": before,
        "while_held": {"rss_mib": rss, "connections": await connection_states(connections)},
        "added_mib": round(rss - before, 1),
    }
    if meanwhile is not None:
        result["a_review_meanwhile"] = await meanwhile()
    await asyncio.sleep(wait_s)
    after = {"rss_mib": server.rss_mib(), "connections": await connection_states(connections)}
    close_all(connections)
    return result | {f"after_{deadline_s:g}_s": after}


class ServedProcess:
    """A server a benchmark starts as a process of its own and probes: ``port`` is where it
    listens once :meth:`started`; its memory and CPU from ``/proc``. ``async with`` it: started
    and settled for a second on entry, stopped on exit."""

    def __init__(self, port: int, command: Sequence[str], env: Mapping[str, str], what: str) -> None:
        self.port, self.what = port, what
        self.process = subprocess.Popen(
            [sys.executable, *command],
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    async def started(self) -> None:
        """Once the port takes connections (30 s at most)."""
        for _ in range(600):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.05)
        raise RuntimeError(f"{self.what} did not start")

    async def __aenter__(self) -> Self:
        await self.started()
        await asyncio.sleep(1.0)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def rss_mib(self) -> float:
        return rss_mib(self.process.pid)

    def peak_rss_mib(self) -> float:
        return peak_rss_mib(self.process.pid)

    def cpu_s(self) -> float:
        return cpu_s(self.process.pid)

    def stop(self) -> None:
        """SIGTERM; SIGKILL after 5 s (a server holding stalled requests waits for them)."""
        end_child(self.process, 5)


def postgres_cpu_s(datadir: Path) -> float:
    """CPU seconds of an embedded PostgreSQL: its postmaster (started on ``datadir``) and children."""
    stats: dict[int, tuple[int, float, str]] = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                parent, cpu = proc_stat(proc.name)
            except OSError:
                continue
            stats[int(proc.name)] = (parent, cpu, command)
    roots = {
        pid for pid, (_, _, command) in stats.items() if str(datadir) in command and "postgres" in command
    }
    return sum(cpu for pid, (parent, cpu, _) in stats.items() if pid in roots or parent in roots)


@dataclass
class CpuMeter:
    """CPU seconds spent by named groups of processes (``pids``), the embedded PostgreSQL of
    ``datadir`` and this process, between two :meth:`read` calls: a measure of work done that a
    busy box distorts far less than wall-clock rates."""

    pids: Mapping[str, Sequence[int]]
    datadir: Path

    def read(self) -> dict[str, float]:
        """CPU seconds so far, by group (processes gone meanwhile count as zero)."""

        def alive(pid: int) -> float:
            try:
                return cpu_s(pid)
            except OSError:
                return 0.0

        spent = {name: sum(alive(pid) for pid in pids) for name, pids in self.pids.items()}
        return {**spent, "postgres": postgres_cpu_s(self.datadir), "this_process": time.process_time()}

    def since(self, before: Mapping[str, float]) -> dict[str, float]:
        """CPU seconds by group from ``before`` (an earlier :meth:`read`) until now."""
        return {name: now - before[name] for name, now in self.read().items()}

    @staticmethod
    def per(before: Mapping[str, float], after: Mapping[str, float], units: int) -> dict[str, float]:
        """Milliseconds of CPU per unit of work, by group, between ``before`` and ``after``."""
        return {name: round((after[name] - before[name]) * 1000 / max(units, 1), 3) for name in after}


@dataclass
class Bench:
    """Handles a benchmark works with: ``pids`` of the consumer processes by role, ``data_dir``
    where the embedded services keep their data."""

    nc: NATS
    js: JetStreamContext
    topology: Topology
    engine: AsyncEngine
    metrics: PipelineMetrics
    database_url: str
    nats_url: str
    pids: dict[str, list[int]] = field(default_factory=dict)
    data_dir: Path = Path()

    def nats_pid(self) -> int:
        """The embedded nats-server's pid (the ``nats.pid`` it writes in its data directory)."""
        return int((self.data_dir / "nats" / "nats.pid").read_text().strip())

    async def transactions(self) -> int:
        """Transactions PostgreSQL committed so far in the benchmark's database."""
        async with self.engine.connect() as conn:
            query = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            return int((await conn.execute(text(query))).scalar_one())


@contextlib.asynccontextmanager
async def pipeline_services(
    data_dir: Path, consumers: Sequence[str] = ("history",), env: Mapping[str, str] | None = None
) -> AsyncIterator[Bench]:
    """Embedded PostgreSQL + NATS in ``data_dir``, migrated, streams declared, consumers running.

    ``consumers`` may repeat a name (two ``dispatch`` processes); ``env`` adds settings. This
    process plays the watcher, so it collects garbage at the pace every command sets."""
    pace_collector()
    # no NATS users: this process plays the watchers and reads what every role reads (up_restart
    # measures `up` with them)
    with EmbeddedServices(data_dir, free_port(), free_port(), None, None, nats_users=False) as services:
        await migrate.upgrade_async(services.database_url)
        topology = Topology("bench")
        nc = await connect(services.nats_url, "bench")
        js = nc.jetstream()
        await ensure_streams(js, topology, NatsSettings())
        engine = make_engine(services.database_url)
        process_env = {
            **os.environ,
            "MPIJC_DATABASE__URL": services.database_url,
            "MPIJC_DATABASE__SINGLE_ROLE": "true",
            "MPIJC_NATS__URL": services.nats_url,
            "MPIJC_NATS__PREFIX": topology.prefix,
            "MPIJC_LOG_LEVEL": "WARNING",
            "MPIJC_METRICS__PORT": "0",
            **(env or {}),
        }
        processes = [
            subprocess.Popen(  # noqa: ASYNC220 - started once, before any measurement
                [
                    sys.executable,
                    *profiled(f"{name}{n}"),
                    "-m",
                    "controller.cli",
                    "consume",
                    "--only",
                    name,
                ],
                env=process_env,
                cwd=data_dir,
                preexec_fn=die_with_this_process(signal.SIGTERM),  # noqa: PLW1509 - only prctl
            )
            for n, name in enumerate(consumers)
        ]
        pids: dict[str, list[int]] = {}
        for name, process in zip(consumers, processes, strict=True):
            pids.setdefault(name, []).append(process.pid)
        urls = services.database_url, services.nats_url
        bench = Bench(nc, js, topology, engine, PipelineMetrics(), *urls, pids, data_dir)
        try:
            await _until_ready(bench, consumers)
            yield bench
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(30)
            await engine.dispose()
            await nc.drain()


def _ready_durable(topology: Topology, role: str) -> str:
    """The durable on JOBS whose existence says a role's process is running (dispatchers: a LISTEN)."""
    if role == "rules":
        return topology.partition_durable(RULES_DURABLE, 0)
    return topology.durable(
        {"history": HISTORY_DURABLE, "notify": NOTIFY_DURABLE, "audit": AUDIT_LIFECYCLE_DURABLE}[role]
    )


async def _until_ready(bench: Bench, consumers: Sequence[str], timeout_s: float = 60) -> None:
    """Until every consumer process has created its durable, and every dispatcher listens."""
    durables = [_ready_durable(bench.topology, name) for name in set(consumers) if name != "dispatch"]
    for _ in range(int(timeout_s * 10)):
        async with bench.engine.connect() as conn:
            listening = (
                await conn.execute(text("SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN %'"))
            ).scalar_one()
        try:
            for name in durables:
                await bench.js.consumer_info(bench.topology.stream("jobs"), name)
        except NotFoundError:
            pass
        else:
            if listening >= consumers.count("dispatch"):
                return
        await asyncio.sleep(0.1)
    raise TimeoutError(f"consumers {list(consumers)} did not start in {timeout_s:g} s")


@contextlib.asynccontextmanager
async def scraped_exporter(workdir: Path, scrape_s: float) -> AsyncIterator[tuple[UsageExporter, Prometheus]]:
    """The test exporter (DCGM- and cAdvisor-shaped series) and a real Prometheus (Debian's
    package) under ``workdir`` scraping it every ``scrape_s``, both stopped on the way out; exits
    saying why where Prometheus is not installed."""
    binary, why = prometheus_binary()
    if binary is None:
        raise SystemExit(why)
    exporter = UsageExporter()
    exporter.start()
    try:
        prometheus = Prometheus(binary, workdir / "prometheus", [f"127.0.0.1:{exporter.port}"], scrape_s)
        await prometheus.start()
        try:
            yield exporter, prometheus
        finally:
            await prometheus.stop()
    finally:
        exporter.stop()


def profiled(name: str) -> list[str]:
    prefix = os.environ.get("BENCH_PROFILE")
    return ["-m", "cProfile", "-o", f"{prefix}.{name}"] if prefix else []


def report(name: str, result: dict[str, Any]) -> None:
    """Print the result as JSON and keep it in ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    (RESULTS / f"{name}.json").write_text(text)
    print(text, end="")


def running_mpijobs(
    count: int, prefix: str, namespace: str, since: str, running: Mapping[str, Any]
) -> tuple[list[Observation], list[k.Obj]]:
    """``count`` 4-worker MPIJobs (``<prefix>-<n>`` in ``namespace``) Running since ``since``, each on
    a node of its own with its launcher and workers ready (``running``: their containers' state), as
    the watch reports them on start; and their pods, each job's launcher then workers 0 to 3."""
    now = datetime.now(UTC)
    observations: list[Observation] = []
    pods: list[k.Obj] = []
    for n in range(count):
        job = k.with_conditions(
            k.mpijob(f"{prefix}-{n}", namespace=namespace), ("Running", "MPIJobRunning", since)
        )
        observations.append(Observation("job", "ADDED", job, now))
        for role, index in [("launcher", None), *(("worker", i) for i in range(4))]:
            pod = k.pod(job, role, index, node=f"node-{n}")
            pod = k.with_container_state(pod, copy.deepcopy(dict(running)), phase="Running", ready=True)
            observations.append(Observation("pod", "ADDED", pod, now))
            pods.append(pod)
    return observations, pods
