"""A restart costs nothing: the rules keep their state in a key-value snapshot, written as they
go, and a restarted consumer replays only what came after it — and still publishes exactly
what one consumer that never stopped would have."""

from __future__ import annotations

from datetime import timedelta

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from consumers.rules import CONSUMER
from controller.bus.publishing import Publisher
from controller.bus.streams import wait_until_consumed
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.testing.drills import findings_on_bus
from tests.rules.replicas import counted, drop_buckets, fresh_replay, replica, running, story

JOBS = 100
BEATS = 44  # 100 jobs x (6 + 44) events = 5,000, a fifth of them ending in an OOM


async def test_a_restarted_consumer_replays_only_the_tail_and_publishes_like_a_fresh_one(
    settings: Settings, topology: Topology, nats_client: NATS, js: JetStreamContext
) -> None:
    history = [e for k in range(JOBS) for e in story(k, BEATS, oom=False)]
    # minutes later, while no consumer runs: every fifth job fails (OOM), and a new job comes and fails
    tail = [
        e
        for n, k in enumerate(range(0, JOBS, 5))
        for e in story(k, BEATS, oom=True, failed_at=timedelta(minutes=5, seconds=2 * n))[-2:]
    ]
    tail += story(JOBS, 24, oom=True, failed_at=timedelta(minutes=6))
    assert len(history) == 5_000 and len(tail) == 72
    publisher = Publisher(js, topology)
    settings.consumer.ack_wait_s = 120  # a slow machine must not turn a long batch into redeliveries
    settings.consumer.rules_lease_ttl_s = 60  # nor a late heartbeat into a partition changing hands
    consumed = (js, topology.stream("jobs"), topology.durable(CONSUMER), 240)
    try:
        first = replica(settings, topology, nats_client, "first")
        async with running(first):
            assert len(first.claimed) == settings.consumer.rules_partitions
            assert await publisher.publish(history) == 5_000
            await wait_until_consumed(*consumed)
        assert sum(w.replayed for w in first.warm_starts) == 0

        assert await publisher.publish(tail) == len(tail)  # the consumer is down: they wait in JOBS

        second = replica(settings, topology, nats_client, "second")
        async with running(second):
            await wait_until_consumed(*consumed)
            held = [f for partition in second.claimed.values() for f in partition.service.engine.firing()]
        warm = second.warm_starts
        assert len(warm) == settings.consumer.rules_partitions
        assert {w.snapshot_sequence for w in warm} == {5_000}  # every partition resumed from it
        assert sum(w.snapshot_runs for w in warm) == JOBS
        assert sum(w.replayed for w in warm) == len(tail)  # the tail only, not the 5,000 before it
        assert sum(w.caught_up for w in warm) == len(tail)  # nobody had handled them: published

        changes, firing = fresh_replay(history + tail)
        assert len(firing) == JOBS // 5 + 1
        assert sorted((f.id, f.rule, f.revision, f.root_cause) for f in held) == sorted(
            (f.id, f.rule, f.revision, f.root_cause) for f in firing
        )
        on_bus = counted(await findings_on_bus(js, topology))
        assert on_bus == counted(changes)  # each change once: none lost, none repeated
    finally:
        await drop_buckets(js, topology)


async def test_a_restart_reads_only_the_findings_published_after_its_snapshot(
    settings: Settings, topology: Topology, nats_client: NATS, js: JetStreamContext
) -> None:
    """A week of findings on the bus costs a restart nothing: the snapshot stands for the bus up
    to its findings sequence, so a restart with nothing new reads no finding, and republishes
    none of those still firing."""
    history = [e for k in range(JOBS) for e in story(k, 4, oom=k % 5 == 0)]
    publisher = Publisher(js, topology)
    settings.consumer.ack_wait_s = 120
    settings.consumer.rules_lease_ttl_s = 60
    consumed = (js, topology.stream("jobs"), topology.durable(CONSUMER), 240)
    try:
        first = replica(settings, topology, nats_client, "first")
        async with running(first):
            assert await publisher.publish(history) == len(history)
            await wait_until_consumed(*consumed)
            firing = sorted(f.id for p in first.claimed.values() for f in p.service.engine.firing())
        on_bus = await findings_on_bus(js, topology)
        assert len(firing) == JOBS // 5 and len(on_bus) >= len(firing)

        second = replica(settings, topology, nats_client, "second")
        async with running(second):
            held = sorted(f.id for p in second.claimed.values() for f in p.service.engine.firing())
        warm = second.warm_starts
        assert len(warm) == settings.consumer.rules_partitions
        assert sum(w.published_known for w in warm) == 0  # nothing on FINDINGS after the snapshots
        assert sum(w.reconciled for w in warm) == 0
        assert held == firing
        assert len(await findings_on_bus(js, topology)) == len(on_bus)  # nothing published again
    finally:
        await drop_buckets(js, topology)
