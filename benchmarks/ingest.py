"""Ingest benchmark: watch events → normalize/correlate → JetStream → history consumer → PostgreSQL.

Two measurements on the embedded services (fresh data directory, everything on this box);
the history consumer runs as its own processes (``consume --only history``; ``--history``, 2 by
default, as the base deploys it), and the watcher pipeline in this one:

- **throughput**: N pod watch events (realistic ~2 KB pods) pushed as fast as the watcher
  pipeline publishes them (as the watchers run it: what changed is published and its version
  remembered in the ``published`` bucket); events/s until the last one is committed in
  PostgreSQL;
- **latency**: the same path at a fixed offered rate; per event, the time from entering the
  watcher pipeline to its row being visible in PostgreSQL (polled every 2 ms), p50/p99.

In the same run, the same objects go through :mod:`benchmarks.reference` (publish → JetStream →
fetch → one upsert per batch → ack, the least a pipeline can do here), in turns with the
project (``--rounds``, fresh objects each round); ``ratio`` is the project's median throughput
over the reference's, ``ratio_per_round`` each round's.

Each side's CPU over its measured window (from ``/proc``, :class:`benchmarks.harness.CpuMeter`),
in µs per event by component: ``this_process`` (the watcher pipeline; the reference's publisher),
``consumers`` (the history consumer processes; the reference's consumer), ``nats`` (the embedded
nats-server) and ``postgres`` (the embedded postmaster and its children), and their ``total``;
``cpu_ratio`` is the median over rounds of the project's total over the reference's,
``cpu_us_per_event`` the medians by component and their ratios.
Prints one JSON document and writes it to ``benchmarks/results/ingest.json``.
Target (docs/architecture.md): ≥ 2,000 events/s floor, ≥ 7,000/s goal.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import Bench, CpuMeter, pipeline_services, report
from benchmarks.reference import payloads, reference_throughput, side_report
from controller.bus.streams import wait_until_consumed
from controller.contract.settings import NatsSettings
from controller.contract.subjects import HISTORY_DURABLE
from controller.testing import objects as k
from watchers.correlating import Observation
from watchers.pipeline import MAX_BATCH, Pipeline
from watchers.published import versioned


def workload(jobs: int, updates_per_pod: int) -> list[Observation]:
    """Jobs of 8 workers + launcher; every pod goes through ``updates_per_pod`` versions."""
    now = datetime.now(UTC)
    out: list[Observation] = []
    for j in range(jobs):
        job = k.mpijob(f"bench-{j}", workers=8)
        out.append(Observation("job", "ADDED", job, now))
        pods = [k.pod(job, "launcher", node="cpu-1")] + [
            k.pod(job, "worker", i, node=f"gpu-{i}") for i in range(8)
        ]
        for version in range(updates_per_pod):
            for n, pod in enumerate(pods):
                state = (
                    {"running": {"startedAt": "2026-11-20T10:00:20Z"}}
                    if version
                    else {"waiting": {"reason": "ContainerCreating"}}
                )
                pods[n] = k.with_container_state(
                    pod, state, phase="Running" if version else "Pending", restarts=version // 3
                )
                pods[n]["metadata"]["annotations"] = {"bench/padding": "x" * 900}  # ~2 KB per pod event
                out.append(Observation("pod", "ADDED" if version == 0 else "MODIFIED", pods[n], now))
    return out


def watcher_pipeline(env: Bench) -> Pipeline:
    """The pipeline as the watchers run it: correlate, publish what changed, remember it."""
    return Pipeline(versioned(env.nc, env.topology, NatsSettings(), env.metrics).publish, env.metrics, 30)


async def throughput(env: Bench, events: list[Observation], meter: CpuMeter) -> dict[str, Any]:
    """Feed ``events`` as the watchers do; events/s until all are committed, and ``meter``'s CPU
    seconds meanwhile (``cpu_s``)."""
    pipeline = watcher_pipeline(env)
    cpu = meter.read()
    start = time.perf_counter()
    for i in range(0, len(events), MAX_BATCH):  # as the watcher's publish loop hands them over
        await pipeline.feed(events[i : i + MAX_BATCH])
    published = time.perf_counter()
    await wait_until_consumed(env.js, env.topology.stream("jobs"), env.topology.durable(HISTORY_DURABLE), 300)
    done = time.perf_counter()
    spent = meter.since(cpu)
    return side_report(len(events), start, published, done, spent)


def cpu_per_event(side: Mapping[str, Any]) -> dict[str, float]:
    """A side's CPU µs per event by component, and their ``total``."""
    spent: dict[str, float] = side["cpu_s"]
    micros = {name: seconds * 1e6 / side["events"] for name, seconds in spent.items()}
    return {name: round(us, 1) for name, us in (micros | {"total": sum(micros.values())}).items()}


def cpu_summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per round and as medians: CPU µs per event of each side by component, project / reference."""
    for r in rounds:
        r["cpu_us_per_event"] = {side: cpu_per_event(r[side]) for side in ("project", "reference")}
        ours, theirs = r["cpu_us_per_event"]["project"], r["cpu_us_per_event"]["reference"]
        r["cpu_ratio"] = round(ours["total"] / theirs["total"], 2)
    medians = {
        side: {
            name: round(statistics.median(r["cpu_us_per_event"][side][name] for r in rounds), 1)
            for name in rounds[0]["cpu_us_per_event"][side]
        }
        for side in ("project", "reference")
    }
    ratio_by = {
        name: round(us / medians["reference"][name], 2) if medians["reference"][name] else None
        for name, us in medians["project"].items()
    }
    return {
        "cpu_ratio": round(statistics.median(r["cpu_ratio"] for r in rounds), 2),
        "cpu_ratio_per_round": [r["cpu_ratio"] for r in rounds],
        "cpu_us_per_event": medians | {"ratio": ratio_by},
    }


async def latency(env: Bench, events: list[Observation], rate: int) -> dict[str, float]:
    """Offer ``rate`` events/s in 10 ms ticks; watch pod_states for each event's resourceVersion."""
    pipeline = watcher_pipeline(env)
    entered: dict[int, float] = {}
    visible: dict[int, float] = {}
    pods = [o for o in events if o.kind == "pod"]
    jobs = [o for o in events if o.kind == "job"]
    await pipeline.feed(jobs)
    per_tick = max(1, rate // 100)
    done = asyncio.Event()

    async def poll() -> None:
        async with env.engine.connect() as conn:
            seen = 0
            while not done.is_set() or len(visible) < len(entered):
                result = await conn.exec_driver_sql(
                    "SELECT coalesce(max(resource_version), 0) FROM pod_states"
                )
                await conn.commit()
                top = int(result.scalar_one())
                now = time.perf_counter()
                if top > seen:
                    for rv in entered:
                        if seen < rv <= top and rv not in visible:
                            visible[rv] = now
                    seen = top
                await asyncio.sleep(0.002)

    poller = asyncio.create_task(poll())
    start = time.perf_counter()
    for tick, i in enumerate(range(0, len(pods), per_tick)):
        await asyncio.sleep(max(0.0, start + tick * 0.01 - time.perf_counter()))
        chunk = pods[i : i + per_tick]
        now = time.perf_counter()
        for o in chunk:
            entered[int(o.object["metadata"]["resourceVersion"])] = now
        await pipeline.feed(chunk)
    done.set()
    await asyncio.wait_for(poller, 60)
    samples = sorted((visible[rv] - entered[rv]) * 1000 for rv in entered)
    return {
        "offered_events_per_s": rate,
        "events": len(samples),
        "p50_ms": round(statistics.median(samples), 2),
        "p99_ms": round(samples[int(len(samples) * 0.99) - 1], 2),
        "max_ms": round(samples[-1], 2),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=250, help="jobs in the throughput workload (9 pods each)")
    parser.add_argument("--updates", type=int, default=9, help="versions per pod")
    parser.add_argument("--rate", type=int, default=1000, help="offered events/s for the latency run")
    parser.add_argument(
        "--history", type=int, default=2, help="history consumer processes (the base deploys 2 replicas)"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="project and reference runs in turns (fresh objects each)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-") as tmp:
        async with pipeline_services(Path(tmp), ("history",) * args.history) as env:
            groups = {"nats": [env.nats_pid()]}
            meter = CpuMeter({**groups, "consumers": env.pids["history"]}, env.data_dir / "postgres")
            rounds = []
            for _ in range(args.rounds):  # in turns, so a noisy stretch of the machine hits both
                events = workload(args.jobs, args.updates)
                project = await throughput(env, events, meter)
                reference = await reference_throughput(env, payloads(o.object for o in events), groups)
                rounds.append({"project": project, "reference": reference})
            ours = statistics.median(r["project"]["events_per_s"] for r in rounds)
            theirs = statistics.median(r["reference"]["events_per_s"] for r in rounds)
            ratios = [r["project"]["events_per_s"] / r["reference"]["events_per_s"] for r in rounds]
            result = {
                "benchmark": "ingest",
                "path": "watch observation → normalize/correlate → JetStream → history consumer → PostgreSQL",
                "machine": "this box: embedded PostgreSQL + NATS, 2 cores",
                "history_consumers": args.history,
                "throughput_events_per_s": ours,
                "reference_events_per_s": theirs,
                "ratio": round(ours / theirs, 2),
                "ratio_per_round": [round(ratio, 2) for ratio in ratios],
                **cpu_summary(rounds),
                "rounds": rounds,
                "latency": await latency(env, workload(max(1, args.rate * 5 // 81), 9), args.rate),
                "target_events_per_s": {"floor": 2000, "goal": 7000},
            }
    report("ingest", result)


if __name__ == "__main__":
    asyncio.run(main())
