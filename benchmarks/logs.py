"""Run logs: following, storing, reading back (docs/logs.md).

Embedded PostgreSQL and NATS, the simulated API server (in this process: its threads' CPU is
counted with the follower's, the same for the reference), ``--pods`` running containers whose
logs hold ``--lines`` lines each of about 100 bytes, with ranks.

- **follow**: a :class:`~watchers.following.LogFollower` follows every container and stores every
  line on ``LOGS``: lines/s, process CPU seconds and RSS; in turns with it (``--rounds``, each on a
  run of its own) the **reference**, the least a follower can do: the same ``pods/log`` follows
  through the same gateway, each chunk read published as it is, no line split, parse or batch.
- **latency**: ``--rate`` lines/s spread over the pods, each stamped with the time it was
  written; a reader following the run on ``LOGS`` (what ``follow=true`` of the API reads) notes
  when each arrives: p50/p99.
- **stored**: bytes on disk of the ``LOGS`` stream (S2-compressed) per stored line.
- **search**: ``GET /api/v1/runs/{uid}/logs`` over the whole stored run through the app, a keyword
  and an RE2 expression matching one line in 10,000: p50/p95 of ``--searches`` requests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import insert

from benchmarks.harness import Bench, pipeline_services, report
from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.logs import RunLogs
from controller.bus.logstore import read_run, stored_position
from controller.bus.publishing import Outgoing, publish_stored
from controller.contract.events import JobRef
from controller.contract.settings import LogSettings, NatsSettings, StaticUser
from controller.kube.gateway import KubeGateway
from controller.metrics import PipelineMetrics
from controller.store.models import Run
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from watchers.following import LogFollower
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
    sim: SimCluster, bench: Bench, ref: JobRef, where: list[tuple[str, str, str]]
) -> AsyncIterator[LogFollower]:
    with KubeGateway.for_url(sim.url, connections=len(where)) as gateway:
        follower = LogFollower(
            gateway, bench.nc, bench.topology, LogSettings(max_follows=len(where)), NatsSettings()
        )
        for pod in sim_pods(sim, where):
            follower.track(normalize_pod(pod, "ADDED", ref, datetime.now(UTC)))
        stop = asyncio.Event()
        task = asyncio.create_task(follower.run(stop))
        try:
            yield follower
        finally:
            stop.set()
            await task


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


async def follow_round(sim: SimCluster, bench: Bench, pods: int, lines: int) -> dict[str, float]:
    ref, where = _run(sim, pods)
    expected = 0
    for p, (ns, pod, container) in enumerate(where):
        text = "".join(_line(p, i) for i in range(lines))
        expected += len(text) - lines  # the newlines are not stored
        sim.set_log(ns, pod, container, text)
    cpu, start = time.process_time(), time.perf_counter()
    async with _follower(sim, bench, ref, where):
        await _all_stored(bench, ref, where, expected)
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu
    total = pods * lines
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


async def latency(sim: SimCluster, bench: Bench, pods: int, rate: int, seconds: float) -> dict[str, Any]:
    ref, where = _run(sim, pods)
    arrived: list[float] = []

    async def reader() -> None:
        async for stored in read_run(
            bench.js, bench.topology, ref.namespace, ref.name, ref.uid, follow=True, wait_s=0.2
        ):
            if stored is None:
                continue
            now = time.time_ns()
            for line in stored.batch.lines:
                sent = line.text.rsplit(" ", 1)[-1]
                if sent.isdigit():
                    arrived.append((now - int(sent)) / 1e6)

    async with _follower(sim, bench, ref, where):
        reading = asyncio.create_task(reader())
        await asyncio.sleep(1.0)  # every follow open
        ticks = int(seconds * 20)
        per_tick = max(1, rate // 20 // pods)
        for tick in range(ticks):
            due = time.perf_counter() + 0.05
            sim.append_logs(
                {
                    (ns, pod, container): "".join(
                        f"[1,{p}]<stdout>:tick {tick} {time.time_ns()}\n" for _ in range(per_tick)
                    )
                    for p, (ns, pod, container) in enumerate(where)
                }
            )
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        await asyncio.sleep(2.0)
        if reading.done():
            reading.result()  # the reader's failure, if it failed
        reading.cancel()
    if not arrived:
        raise RuntimeError(f"no line of the {ticks * per_tick * pods} written was seen")
    ordered = sorted(arrived)
    written = ticks * per_tick * pods
    return {
        "lines_per_s_written": round(written / seconds),
        "lines_seen": len(ordered),
        "lines_written": written,
        "p50_ms": round(ordered[len(ordered) // 2], 1),
        "p99_ms": round(ordered[int(len(ordered) * 0.99)], 1),
        "max_ms": round(ordered[-1], 1),
    }


async def search(bench: Bench, ref: JobRef, searches: int) -> dict[str, Any]:
    async with bench.engine.begin() as conn:
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
    users = {TOKEN: StaticUser(username="bench", namespaces=["*"])}
    app = create_app(
        bench.engine, PipelineMetrics(), StaticAccess(users), run_logs=RunLogs(bench.js, bench.topology)
    )
    out: dict[str, Any] = {}
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
            rounds = []
            for _ in range(args.rounds):
                ours = await follow_round(sim, bench, args.pods, args.lines)
                reference = await reference_round(sim, bench, args.pods, args.lines)
                rounds.append(
                    {
                        "follower": ours,
                        "reference": reference,
                        "ratio": round(ours["lines_per_s"] / reference["lines_per_s"], 2),
                    }
                )
            # one more followed run, alone on a fresh stream, for bytes per line and the search
            await bench.js.purge_stream(bench.topology.stream("logs"))
            ref, where = _run(sim, args.pods)
            expected = 0
            for p, (ns, pod, container) in enumerate(where):
                text = "".join(_line(p, i) for i in range(args.lines))
                expected += len(text) - args.lines
                sim.set_log(ns, pod, container, text)
            async with _follower(sim, bench, ref, where):
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
            searched = await search(bench, ref, args.searches)
            live = await latency(sim, bench, args.pods, args.rate, args.seconds)
    return {
        "pods": args.pods,
        "lines_per_pod": args.lines,
        "rounds": rounds,
        "ratio_median": statistics.median(r["ratio"] for r in rounds),
        "stored": stored,
        "search_whole_run": searched,
        "latency": live,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=int, default=2000, help="lines/s written during the latency run")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--searches", type=int, default=10)
    report("logs", asyncio.run(main(parser.parse_args())))
