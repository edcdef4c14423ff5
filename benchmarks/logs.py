"""Run logs: following, storing, reading back (docs/logs.md).

Embedded PostgreSQL and NATS.

- **follow**: ``--pods`` running containers on the simulated API server (in this process: its
  threads' CPU is counted with the follower's, the same for the reference) whose logs hold
  ``--lines`` lines each of about 80 bytes, with ranks; a :class:`~watchers.following.LogFollower`
  follows every container until it says every line is stored on ``LOGS``: lines/s, process CPU
  seconds. In turns with it (``--rounds``, each on a run of its own) the **reference**, the least
  a follower can do: the same ``pods/log`` follows through the same gateway, each chunk read
  published as it is, no line split, parse or batch.
- **stored**: bytes on disk of the ``LOGS`` stream (S2-compressed) per stored line.
- **search**: ``GET /api/v1/runs/{uid}/logs`` through the app over the whole followed run, and over
  a run of ``--search-mib`` MiB of text (the per-run cap's 64 MiB by default) published as
  followers store it, a keyword and an RE2 expression each matching one line per container
  (once in the large run): p50/p95 of ``--searches`` requests.
- **live**: for each of ``--live-pods``, ``--rate`` lines/s spread over that many followed
  containers for ``--seconds``, written by :mod:`benchmarks.logwriter` (a simulated API server in
  a process of its own) and read by :mod:`benchmarks.logreader` (following the run on ``LOGS``
  as ``follow=true`` of the API does, in a process of its own): written → stored and written →
  read p50/p99/max; this process's CPU and RSS, which now hold the follower alone, and its RSS
  per follow; of that CPU, the event loop's (its thread's clock) per batch stored and the
  reading threads'.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from benchmarks.harness import Bench, cpu_s, pipeline_services, report, rss_mib
from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.logs import RunLogs
from controller.bus.logstore import publish_batches, stored_position
from controller.bus.publishing import Outgoing, publish_stored
from controller.contract.events import JobRef
from controller.contract.logs import LogBatch, LogPosition, PackedBatch
from controller.contract.settings import LogSettings, NatsSettings, StaticUser
from controller.kube.gateway import KubeGateway
from controller.metrics import PipelineMetrics
from controller.store.models import Run
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import running_until_exit, until
from watchers.following import LogFollower
from watchers.metrics import WatchMetrics
from watchers.normalizing import normalize_pod

RUNNING = {"running": {"startedAt": "2026-11-20T10:01:00Z"}}
TOKEN = "bench"


def _line(pod: int, i: int) -> str:
    loss = 1.0 / (i + 1)
    return (
        f"[1,{pod}]<stdout>:step {i:07d} loss {loss:.6f} lr 3.0e-04 grad_norm 0.{i % 997:03d} tok/s 81234\n"
    )


def _run(sim: SimCluster, pods: int) -> tuple[JobRef, list[tuple[str, str, str]]]:
    """A running MPIJob with ``pods - 1`` workers; its ref and (namespace, pod, container) of each."""
    job = k.mpijob(f"bench-{uuid.uuid4().hex[:6]}", workers=pods - 1)
    sim.create(job)
    meta = job["metadata"]
    ref = JobRef(uid=meta["uid"], kind="MPIJob", namespace=meta["namespace"], name=meta["name"])
    where = []
    for role, index in [("launcher", None), *(("worker", i) for i in range(pods - 1))]:
        pod = k.with_container_state(k.pod(job, role, index), RUNNING, phase="Running", ready=True)
        sim.create(pod)
        where.append(
            (pod["metadata"]["namespace"], pod["metadata"]["name"], pod["spec"]["containers"][0]["name"])
        )
    return ref, where


@contextlib.asynccontextmanager
async def _follower(
    url: str,
    bench: Bench,
    ref: JobRef,
    pods: list[dict[str, Any]],
    linger_s: float,
    metrics: WatchMetrics | None = None,
) -> AsyncIterator[LogFollower]:
    with KubeGateway.for_url(url, connections=len(pods)) as gateway:
        follower = LogFollower(
            gateway,
            bench.nc,
            bench.topology,
            LogSettings(max_follows=len(pods), linger_s=linger_s),
            NatsSettings(),
            metrics=metrics,
        )
        for pod in pods:
            follower.track(normalize_pod(pod, "ADDED", ref, datetime.now(UTC)))
        async with running_until_exit(follower.run):
            yield follower


def sim_pods(sim: SimCluster, where: list[tuple[str, str, str]]) -> list[dict[str, Any]]:
    found = []
    for ns, pod, _ in where:
        obj = sim.get({"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": ns, "name": pod}})
        assert obj is not None
        found.append(obj)
    return found


async def _stored_bytes(bench: Bench, ref: JobRef, where: list[tuple[str, str, str]]) -> int:
    total = 0
    for _, pod, container in where:
        position = await stored_position(
            bench.js, bench.topology, ref.namespace, ref.name, ref.uid, pod, container
        )
        total += position.stored_bytes
    return total


async def _all_stored(bench: Bench, ref: JobRef, where: list[tuple[str, str, str]], expected: int) -> None:
    """Until the run's containers stored ``expected`` bytes of text."""

    async def done() -> bool:
        return await _stored_bytes(bench, ref, where) >= expected

    await until(done, 600.0, interval_s=0.05)


async def follow_round(
    sim: SimCluster, bench: Bench, pods: int, lines: int, linger_s: float
) -> dict[str, float]:
    ref, where = _run(sim, pods)
    expected = 0
    for p, (ns, pod, container) in enumerate(where):
        text = "".join(_line(p, i) for i in range(lines))
        expected += len(text) - lines  # the newlines are not stored
        sim.set_log(ns, pod, container, text)
    total = pods * lines
    metrics = WatchMetrics()
    cpu, start = time.process_time(), time.perf_counter()
    async with _follower(sim.url, bench, ref, sim_pods(sim, where), linger_s, metrics):
        # the follower's own count of lines stored (acknowledged by the bus): nothing polled
        await until(lambda: metrics.sample("mpijc_log_lines_total") >= total, 600.0, interval_s=0.01)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
    assert await _stored_bytes(bench, ref, where) == expected
    return {
        "lines_per_s": round(total / seconds),
        "cpu_s_per_100k_lines": round(cpu / total * 1e5, 2),
        "seconds": round(seconds, 2),
    }


async def reference_round(sim: SimCluster, bench: Bench, pods: int, lines: int) -> dict[str, float]:
    """Each container's follow read and every chunk published as it came (no split, parse, batch)."""
    ref, where = _run(sim, pods)
    size = 0
    for p, (ns, pod, container) in enumerate(where):
        text = "".join(_line(p, i) for i in range(lines))
        sim.set_log(ns, pod, container, text)
        size += len(text)
    cpu, start = time.process_time(), time.perf_counter()
    read = 0
    with KubeGateway.for_url(sim.url, connections=len(where)) as gateway:

        async def one(ns: str, pod: str, container: str) -> int:
            follow = gateway.follow_log(ns, pod, container)
            subject = bench.topology.log_subject(ref.namespace, ref.name, ref.uid, pod, container)
            got = 0
            try:
                while got < size // pods:
                    chunk = await asyncio.to_thread(follow.read)
                    if not chunk:
                        break
                    await publish_stored(bench.js, [Outgoing(subject, chunk)])
                    got += len(chunk)
            finally:
                follow.close()
            return got

        read = sum(await asyncio.gather(*(one(*w) for w in where)))
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu
    total = pods * lines
    assert read >= size, (read, size)
    return {
        "lines_per_s": round(total / seconds),
        "cpu_s_per_100k_lines": round(cpu / total * 1e5, 2),
        "seconds": round(seconds, 2),
    }


async def _process(module: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=64 * 1024**2,  # the writer's first line holds every pod
    )


async def _ask(process: asyncio.subprocess.Process, command: str | None = None) -> Any:
    """Send ``command`` (if any), read the process's next JSON line."""
    assert process.stdin is not None and process.stdout is not None
    if command is not None:
        process.stdin.write(f"{command}\n".encode())
        await process.stdin.drain()
    return json.loads(await process.stdout.readline())


def _threads_cpu_s() -> tuple[float, float]:
    """CPU seconds of this process's main thread (the event loop) and of all its other threads
    (the follows' readers), each by its own thread clock."""
    loop = others = 0.0
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        with contextlib.suppress(OSError, ProcessLookupError):  # a thread that ended meanwhile
            spent = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
            if thread is threading.main_thread():
                loop += spent
            else:
                others += spent
    return loop, others


async def live(bench: Bench, pods: int, rate: int, seconds: float, linger_s: float) -> dict[str, Any]:
    """``rate`` lines/s over ``pods`` followed containers, written by :mod:`benchmarks.logwriter`
    and read back on ``LOGS`` as ``follow=true`` of the API reads them by
    :mod:`benchmarks.logreader`, each in a process of its own: written → stored and written →
    read p50/p99, this process's CPU and RSS (the follower and its NATS client alone), the
    event loop's CPU per batch stored and the reading threads' CPU."""
    stream = bench.topology.stream("logs")
    batches = (await bench.js.stream_info(stream)).state.messages
    writer = await _process("benchmarks.logwriter", "--pods", str(pods))
    reader: asyncio.subprocess.Process | None = None
    try:
        hello = await _ask(writer)
        ref = JobRef.model_validate(hello["job"])
        reader = await _process(
            "benchmarks.logreader",
            *("--nats", bench.nats_url, "--prefix", bench.topology.prefix),
            *("--namespace", ref.namespace, "--job", ref.name, "--uid", ref.uid),
        )
        await _ask(reader)
        rss_before = rss_mib(os.getpid())
        async with _follower(hello["url"], bench, ref, hello["pods"], linger_s) as follower:
            await until(lambda: len(follower.following) == pods, 60.0, interval_s=0.1)

            async def all_open() -> bool:
                return bool((await _ask(writer, "open"))["open"] == pods)

            await until(all_open, 60.0, interval_s=0.2)  # every follow's request answered
            rss_following = rss_mib(os.getpid())
            cpu, writer_cpu, start = cpu_s(os.getpid()), cpu_s(writer.pid), time.perf_counter()
            threads = _threads_cpu_s()
            answer = asyncio.ensure_future(_ask(writer, f"write {rate} {seconds}"))
            peak = rss_following
            while not answer.done():
                await asyncio.wait([answer], timeout=0.5)
                peak = max(peak, rss_mib(os.getpid()))
            written = answer.result()["written"]
            wrote_s = time.perf_counter() - start
            writer_cpu = cpu_s(writer.pid) - writer_cpu
            seen = await _ask(reader, f"seen {written}")
            cpu = cpu_s(os.getpid()) - cpu
            loop_cpu, readers_cpu = (b - a for a, b in zip(threads, _threads_cpu_s(), strict=True))
    finally:
        for process in (writer, reader):
            if process is not None and process.stdin is not None:
                process.stdin.close()
                await process.wait()
    batches = (await bench.js.stream_info(stream)).state.messages - batches
    return {
        "pods": pods,
        "lines_written": written,
        "lines_per_s_written": round(written / wrote_s),
        **seen,
        "follower_cpu_s_per_s": round(cpu / wrote_s, 2),
        "follower_cpu_s_per_100k_lines": round(cpu / written * 1e5, 2),
        "batches_per_100k_lines": round(batches / written * 1e5),
        "loop_cpu_us_per_batch": round(loop_cpu / max(batches, 1) * 1e6, 1),
        "loop_cpu_s_per_100k_lines": round(loop_cpu / written * 1e5, 2),
        "readers_cpu_s_per_100k_lines": round(readers_cpu / written * 1e5, 2),
        "writer_cpu_s_per_s": round(writer_cpu / wrote_s, 2),
        "rss_mib": {"before": rss_before, "following": rss_following, "peak": peak},
        "kib_per_follow": round((rss_following - rss_before) * 1024 / pods, 1),
    }


async def large_run(bench: Bench, text_mib: int) -> tuple[JobRef, dict[str, Any]]:
    """A run of 20 containers holding ``text_mib`` MiB of text on ``LOGS``, published directly in
    batches as followers store them (the search's input; no follower involved)."""
    ref = JobRef(uid=str(uuid.uuid4()), kind="MPIJob", namespace="bench", name=f"big-{uuid.uuid4().hex[:6]}")
    per_line = len(_line(0, 0)) - 1
    total = text_mib * 1024**2 // per_line
    base = time.time_ns()
    start = time.perf_counter()
    batches: list[PackedBatch] = []
    stored = dict.fromkeys(range(20), 0)
    for first in range(0, total, 3000):  # ~256 KiB of text per batch, as batch_max_bytes
        pod = (first // 3000) % 20
        lines: list[dict[str, int | str]] = []
        for i in range(first, min(first + 3000, total)):
            text = _line(pod, i)[:-1]
            lines.append({"ts": base + i * 1000, "rank": pod, "text": text})
            stored[pod] += len(text)
        position = LogPosition(ts=base + (first + len(lines) - 1) * 1000, ties=1, stored_bytes=stored[pod])
        head = LogBatch(
            run_uid=ref.uid,
            namespace=ref.namespace,
            job=ref.name,
            pod=f"pod-{pod}",
            container="c",
            position=position,
        )
        batches.append(PackedBatch.of(head, lines))
        if len(batches) == 16:
            await publish_batches(bench.js, bench.topology, batches, 30.0)
            batches = []
    await publish_batches(bench.js, bench.topology, batches, 30.0)
    return ref, {"lines": total, "text_mib": text_mib, "publish_s": round(time.perf_counter() - start, 1)}


async def store_run(engine: AsyncEngine, ref: JobRef) -> None:
    """The ``runs`` row of a run made by :func:`large_run` (Running since now)."""
    async with engine.begin() as conn:
        created = datetime.now(UTC)
        await conn.execute(
            insert(Run),
            [
                {
                    "uid": ref.uid,
                    "kind": "MPIJob",
                    "namespace": ref.namespace,
                    "name": ref.name,
                    "attempt": 1,
                    "previous_uid": None,
                    "phase": "Running",
                    "resource_version": 1,
                    "conditions": [],
                    "spec": {},
                    "labels": {},
                    "created_at": created,
                    "started_at": created,
                    "finished_at": None,
                    "deleted_at": None,
                    "first_observed_at": created,
                    "last_observed_at": created,
                }
            ],
        )


async def search(bench: Bench, ref: JobRef, searches: int, run: dict[str, Any]) -> dict[str, Any]:
    await store_run(bench.engine, ref)
    users = {TOKEN: StaticUser(username="bench", namespaces=["*"])}
    app = create_app(
        bench.engine, PipelineMetrics(), StaticAccess(users), run_logs=RunLogs(bench.js, bench.topology)
    )
    out: dict[str, Any] = dict(run)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://api", timeout=600
    ) as http:
        for name, params in (
            ("keyword", {"q": "step 0001234 "}),
            ("regex", {"q": r"step 000\d*1234 loss", "regex": "true"}),
        ):
            took = []
            for _ in range(searches):
                start = time.perf_counter()
                answer = await http.get(
                    f"/api/v1/runs/{ref.uid}/logs",
                    params=params,
                    headers={"Authorization": f"Bearer {TOKEN}"},
                )
                took.append((time.perf_counter() - start) * 1000)
                assert answer.status_code == 200, answer.text
            took.sort()
            out[name] = {
                "matches": len(answer.json()["items"]),
                "p50_ms": round(took[len(took) // 2], 1),
                "p95_ms": round(took[int(len(took) * 0.95)], 1),
            }
    return out


def _dir_bytes(data_dir: Path, stream: str) -> int:
    """Bytes on disk of a stream's directory in the embedded NATS's store."""
    path = next(data_dir.rglob(stream))
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


async def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-logs-") as tmp, SimCluster() as sim:
        async with pipeline_services(Path(tmp), consumers=()) as bench:
            # first, while this process holds nothing else (the rounds' logs stay in the simulated server)
            live_runs = [await live(bench, n, args.rate, args.seconds, args.linger) for n in args.live_pods]
            rounds: list[dict[str, Any]] = []
            for _ in range(args.rounds):
                ours = await follow_round(sim, bench, args.pods, args.lines, args.linger)
                reference = await reference_round(sim, bench, args.pods, args.lines)
                rounds.append(
                    {
                        "follower": ours,
                        "reference": reference,
                        "ratio": round(ours["lines_per_s"] / reference["lines_per_s"], 2),
                    }
                )
            # one more followed run, alone on a fresh stream, for bytes per line
            await bench.js.purge_stream(bench.topology.stream("logs"))
            ref, where = _run(sim, args.pods)
            expected = 0
            for p, (ns, pod, container) in enumerate(where):
                text = "".join(_line(p, i) for i in range(args.lines))
                expected += len(text) - args.lines
                sim.set_log(ns, pod, container, text)
            async with _follower(sim.url, bench, ref, sim_pods(sim, where), args.linger):
                await _all_stored(bench, ref, where, expected)
            info = await bench.js.stream_info(bench.topology.stream("logs"))
            on_disk = await asyncio.to_thread(_dir_bytes, Path(tmp), bench.topology.stream("logs"))
            stored = {
                "lines": args.pods * args.lines,
                "text_bytes": expected,
                "stream_bytes": info.state.bytes,
                "disk_bytes": on_disk,
                "disk_bytes_per_line": round(on_disk / (args.pods * args.lines), 1),
                "text_bytes_per_line": round(expected / (args.pods * args.lines), 1),
            }
            searched = {
                "followed_run": await search(bench, ref, args.searches, {"lines": args.pods * args.lines})
            }
            if args.search_mib:
                big, made = await large_run(bench, args.search_mib)
                searched["large_run"] = await search(bench, big, args.searches, made)
    return {
        "pods": args.pods,
        "lines_per_pod": args.lines,
        "linger_s": args.linger,
        "rounds": rounds,
        "ratio_median": statistics.median(r["ratio"] for r in rounds),
        "stored": stored,
        "search": searched,
        "live": live_runs,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=10000, help="lines/s written during each live run")
    parser.add_argument("--seconds", type=float, default=10.0, help="of each live run")
    parser.add_argument(
        "--live-pods", type=int, nargs="*", default=[20, 500], help="followed containers of each live run"
    )
    parser.add_argument(
        "--linger", type=float, default=LogSettings().linger_s, help="the followers' linger_s"
    )
    parser.add_argument("--searches", type=int, default=10)
    parser.add_argument(
        "--search-mib", type=int, default=64, help="MiB of text of the large run searched (0: none)"
    )
    report("logs", asyncio.run(main(parser.parse_args())))
