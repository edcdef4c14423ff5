"""Failure-signal benchmark: a worker's OOM kill entering the watcher → the finding on the bus.

The rules consumer runs as its own process (``consume --only rules``), as deployed; the
watcher pipeline runs here and, besides the failures, keeps up a background of ordinary pod
updates at ``--background`` events/s, so the rules see a busy cluster. For each of
``--failures`` jobs, the OOMKilled pod update is fed to the watcher pipeline at a known
instant and the arrival of its ``oom`` finding on ``findings.>`` (a core NATS subscription)
is timed. Target (docs/architecture.md): p99 < 1 s (the platform goal is 30 s).

Prints one JSON document and writes ``benchmarks/results/findings.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from nats.aio.msg import Msg

from benchmarks.harness import Bench, pipeline_services, report, running_mpijobs
from controller.bus.publishing import Publisher
from controller.bus.streams import wait_until_consumed
from controller.contract.findings import parse_finding
from controller.contract.subjects import RULES_DURABLE
from controller.testing import objects as k
from watchers.correlating import Observation
from watchers.pipeline import Pipeline


def running_jobs(count: int) -> tuple[list[Observation], list[k.Obj]]:
    """``count`` running 4-worker MPIJobs, and worker 2 of each (the one that will be killed)."""
    started = "2026-11-20T10:00:20Z"
    observations, pods = running_mpijobs(count, "job", "team-a", started, {"running": {"startedAt": started}})
    return observations, pods[3::5]  # each job's launcher, workers 0 to 3


def oom_killed(pod: k.Obj) -> Observation:
    killed = k.with_container_state(
        pod,
        {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": datetime.now(UTC).isoformat()}},
        phase="Failed",
    )
    return Observation("pod", "MODIFIED", killed, datetime.now(UTC))


async def measure(env: Bench, failures: int, background: int) -> dict[str, float]:
    pipeline = Pipeline(Publisher(env.js, env.topology).publish, env.metrics, 30)
    setup, victims = running_jobs(failures)
    noise, _ = running_jobs(200)
    await pipeline.feed(setup + noise)
    await wait_until_consumed(env.js, env.topology.stream("jobs"), env.topology.durable(RULES_DURABLE), 120)

    arrived: dict[str, float] = {}
    all_arrived = asyncio.Event()

    async def on_finding(msg: Msg) -> None:
        finding = parse_finding(msg.data)
        if finding.rule == "oom" and finding.status == "firing":
            arrived.setdefault(finding.job.name, time.perf_counter())
            if len(arrived) == failures:
                all_arrived.set()

    sub = await env.nc.subscribe(env.topology.wildcard("findings"), cb=on_finding)
    entered: dict[str, float] = {}
    noise_pods = [dict(o.object) for o in noise if o.kind == "pod"]
    per_tick = max(1, background // 100)
    for n, victim in enumerate(victims):  # one failure every 50 ms, background in 10 ms ticks
        for tick in range(5):
            chunk = [
                Observation(
                    "pod",
                    "MODIFIED",
                    k.with_container_state(
                        noise_pods[(n * 5 + tick + i) % len(noise_pods)],
                        {"running": {"startedAt": "2026-11-20T10:00:20Z"}},
                        phase="Running",
                        ready=True,
                        restarts=n,
                    ),
                    datetime.now(UTC),
                )
                for i in range(per_tick)
            ]
            if tick == 0:
                name = victim["metadata"]["labels"]["training.kubeflow.org/job-name"]
                entered[name] = time.perf_counter()
                chunk.insert(0, oom_killed(victim))
            await pipeline.feed(chunk)
            await asyncio.sleep(0.01)
    with contextlib.suppress(TimeoutError):  # a missing finding shows up in the counts below
        await asyncio.wait_for(all_arrived.wait(), 30)
    await sub.unsubscribe()
    samples = sorted((arrived[name] - entered[name]) * 1000 for name in entered if name in arrived)
    return {
        "failures": len(entered),
        "findings": len(samples),
        "background_events_per_s": background,
        "p50_ms": round(statistics.median(samples), 1),
        "p99_ms": round(samples[max(0, int(len(samples) * 0.99) - 1)], 1),
        "max_ms": round(samples[-1], 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failures", type=int, default=200)
    parser.add_argument("--background", type=int, default=500, help="ordinary pod updates per second")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-") as tmp:
        async with pipeline_services(Path(tmp), consumers=("rules",)) as env:
            result = {
                "benchmark": "findings",
                "path": "OOMKilled pod update → watcher pipeline → JetStream → rules consumer → findings.>",
                "machine": "this box: embedded PostgreSQL + NATS, 2 cores",
                "latency": await measure(env, args.failures, args.background),
                "target_p99_ms": 1000,
            }
    report("findings", result)


if __name__ == "__main__":
    asyncio.run(main())
