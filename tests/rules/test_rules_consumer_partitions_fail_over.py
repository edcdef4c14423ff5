"""Rules scale out and fail over: two replicas share the partitions; one is killed in the middle
of a burst, the other takes its partitions over within seconds, and every finding the burst
causes is on the FINDINGS stream exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import timedelta

from nats.js import JetStreamContext

from consumers.rules import CONSUMER
from controller.bus.publishing import Publisher
from controller.bus.streams import connect, wait_until_consumed
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.testing.drills import findings_on_bus
from tests.rules.replicas import counted, drop_buckets, fresh_replay, replica, story

JOBS = 80


async def until(condition: object, timeout_s: float, what: str) -> float:
    """Seconds until ``condition()`` holds."""
    started = time.monotonic()
    while not condition():  # type: ignore[operator]
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - started


async def test_a_killed_replicas_partitions_are_taken_over_and_no_finding_is_lost_or_repeated(
    settings: Settings, topology: Topology, js: JetStreamContext
) -> None:
    settings.consumer.rules_lease_ttl_s = 3.0
    settings.consumer.ack_wait_s = 2.0
    partitions = settings.consumer.rules_partitions
    # the burst: every job starts, a third of them fail with an OOM (in time order, as watched)
    first_half = [e for k in range(JOBS // 2) for e in story(k, 6, oom=False)]
    second_half = [e for k in range(JOBS // 2, JOBS) for e in story(k, 6, oom=False)]
    failures = [
        e
        for n, k in enumerate(range(0, JOBS, 3))
        for e in story(k, 6, oom=True, failed_at=timedelta(minutes=5, seconds=2 * n))[-2:]
    ]
    assert settings.nats.url
    doomed_nc = await connect(settings.nats.url, "rules-doomed")
    survivor_nc = await connect(settings.nats.url, "rules-survivor")
    doomed = replica(settings, topology, doomed_nc, "doomed")
    survivor = replica(settings, topology, survivor_nc, "survivor")
    stop = asyncio.Event()
    publisher = Publisher(js, topology)
    tasks: list[asyncio.Task[None]] = []
    try:
        await doomed.start()
        tasks.append(asyncio.create_task(doomed.run(stop)))
        await survivor.start()
        tasks.append(asyncio.create_task(survivor.run(stop)))
        await until(lambda: len(doomed.claimed) == len(survivor.claimed) == partitions // 2, 15, "4 and 4")
        assert set(doomed.claimed).isdisjoint(survivor.claimed)

        await publisher.publish(first_half)
        await wait_until_consumed(js, topology.stream("jobs"), topology.durable(CONSUMER), 30)
        await publisher.publish(second_half + failures)  # and in the middle of it:
        await asyncio.sleep(0.05)
        orphans, before = set(doomed.claimed), len(survivor.warm_starts)
        tasks[0].cancel()  # the doomed replica dies: no hand-over, its leases just expire
        with contextlib.suppress(asyncio.CancelledError):
            await tasks[0]
        await doomed_nc.close()

        took = await until(lambda: len(survivor.claimed) == partitions, 15, "the survivor holds all")
        assert took < settings.consumer.rules_lease_ttl_s + 8  # within seconds
        await wait_until_consumed(js, topology.stream("jobs"), topology.durable(CONSUMER), 30)
        taken_over = survivor.warm_starts[before:]
        assert {w.partition for w in taken_over} == orphans
        assert all(w.snapshot_sequence > 0 for w in taken_over)  # resumed from the doomed one's snapshots

        changes, firing = fresh_replay(first_half + second_half + failures)
        assert len(firing) == len(range(0, JOBS, 3))
        await asyncio.sleep(0.5)  # anything late would show now
        assert counted(await findings_on_bus(js, topology)) == counted(changes)  # each exactly once
    finally:
        stop.set()
        for task in tasks:
            if not task.done():
                await task
        for nc in (doomed_nc, survivor_nc):
            with contextlib.suppress(Exception):
                await nc.close()
        await drop_buckets(js, topology)


def test_partitions_are_stable_across_processes(topology: Topology) -> None:
    """The partition of a job is a stable hash: every replica and every version agree."""
    subject = f"{topology.prefix}.jobs.team-a.llm-sft-13b.pod"
    assert topology.job_partition(subject, 8) == topology.partition_of("team-a", "llm-sft-13b", 8)
    assert Topology().job_partition("findings.team-a.x.oom", 8) is None
    assert len({topology.partition_of("team-a", f"job-{k}", 8) for k in range(100)}) == 8
