"""Helpers for the tests of the partitioned rules consumer: job stories by the thousand, replicas
run in process, and what the FINDINGS stream holds."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from consumers.rules import RuleEngine, RulesReplica
from consumers.rules.replica import LEASE_BUCKET
from consumers.rules.snapshot import STATE_BUCKET
from controller.contract.clock import utcnow
from controller.contract.events import BusEvent
from controller.contract.findings import Finding
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing.events import T0, job, launcher, ref, terminated, worker


def story(k: int, beats: int, *, oom: bool, failed_at: timedelta | None = None) -> list[BusEvent]:
    """Job ``k``: started, its pods running, ``beats`` pod updates that change nothing, then
    (if ``oom``) worker 2 OOMKilled and the job Failed a second later (at ``T0 + failed_at``, by
    default right after the beats). ``6 + beats + 2 * oom`` events."""
    run = ref("team-a" if k % 2 else "team-b", f"job-{k}", f"uid-job-{k}")
    t = T0 + timedelta(seconds=k)
    events: list[BusEvent] = [
        job("Running", observed_at=t, job=run, created_at=t),
        launcher(observed_at=t, job=run, uid=f"uid-{k}-launcher", created_at=t),
        *(worker(i, observed_at=t, job=run, uid=f"uid-{k}-worker-{i}", created_at=t) for i in range(4)),
    ]
    for beat in range(beats):
        at = t + timedelta(seconds=1 + beat)
        events.append(
            worker(beat % 4, observed_at=at, job=run, uid=f"uid-{k}-worker-{beat % 4}", created_at=t)
        )
    if oom:
        failed = T0 + failed_at if failed_at is not None else t + timedelta(seconds=beats + 2)
        events.append(
            worker(
                2,
                phase="Failed",
                ready=False,
                containers=(terminated("OOMKilled", 137),),
                observed_at=failed,
                job=run,
                uid=f"uid-{k}-worker-2",
                created_at=t,
            )
        )
        events.append(job("Failed", observed_at=failed + timedelta(seconds=1), job=run, created_at=t))
    return events


def replica(settings: Settings, topology: Topology, nc: NATS, name: str) -> RulesReplica:
    """One replica of the rules, with metrics of its own."""
    metrics = PipelineMetrics()
    return RulesReplica(
        topology,
        settings.consumer,
        settings.rules,
        nc,
        metrics,
        utcnow,
        replica=name,
        tick_s=0.5,
    )


@contextlib.asynccontextmanager
async def running(rules: RulesReplica) -> AsyncIterator[asyncio.Task[None]]:
    """Start a replica and run it until the block ends (then it hands its partitions back)."""
    stop = asyncio.Event()
    await rules.start()
    task = asyncio.create_task(rules.run(stop))
    try:
        yield task
    finally:
        stop.set()
        if not task.done():
            await task


def fresh_replay(events: list[BusEvent]) -> tuple[list[Finding], list[Finding]]:
    """What one engine that saw every event live publishes, and what fires at the end."""
    engine = RuleEngine()
    changes = [change for event in events for change in engine.observe(event, event.observed_at)]
    return changes, engine.firing()


def key(finding: Finding) -> tuple[str, int, str]:
    return (finding.id, finding.revision, finding.status)


def counted(findings: list[Finding]) -> Counter[tuple[str, int, str]]:
    return Counter(key(f) for f in findings)


async def drop_buckets(js: JetStreamContext, topology: Topology) -> None:
    """The rules' key-value buckets of this test (the shared server outlives it)."""
    for bucket in (STATE_BUCKET, LEASE_BUCKET):
        with contextlib.suppress(Exception):
            await js.delete_key_value(topology.bucket(bucket))
