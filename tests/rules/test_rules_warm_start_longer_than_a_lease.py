"""A rules replica keeps the partitions it warm-starts, however long the warm start takes.

On a big cluster a partition's warm start (its snapshot: hundreds of runs, and the findings on
the bus) took 4 s, most of the 6 s lease: the leases expired before the replica's first
renewal, it lost its partitions and warm-started them all over again, and findings waited.
Leases are now renewed while partitions warm up — and the warm start's CPU (the snapshot's
parse, the replay, the tick) is done in turns, so that the renewals are not held back behind
seconds of it on a loaded machine either.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from consumers.rules import RuleEngine, RulesService, WarmStart
from consumers.rules.engine import HeldRun
from controller.bus.publishing import Publisher
from controller.contract.findings import Finding
from controller.contract.phases import Phases
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from tests.rules.replicas import drop_buckets, replica, running, story


async def test_partitions_warming_up_longer_than_their_lease_are_kept(
    settings: Settings,
    topology: Topology,
    nats_client: NATS,
    js: JetStreamContext,  # the streams declared
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.consumer.rules_lease_ttl_s = 1.5  # renewed every 0.5 s
    warm_start = RulesService.warm_start

    async def slow(
        self: RulesService, live_after: int | None = None, phases: Phases | None = None
    ) -> WarmStart:
        await asyncio.sleep(3.0)  # twice the lease
        return await warm_start(self, live_after=live_after, phases=phases)

    monkeypatch.setattr(RulesService, "warm_start", slow)
    rules = replica(settings, topology, nats_client, "slow")
    async with running(rules):
        assert sorted(rules.claimed) == list(range(settings.consumer.rules_partitions))
        await asyncio.sleep(2.0)  # a few heartbeats on: nothing was lost and started again
        assert sorted(rules.claimed) == list(range(settings.consumer.rules_partitions))
        assert len(rules.warm_starts) == settings.consumer.rules_partitions


async def test_a_renewal_under_way_when_the_warm_start_ends_is_not_lost(
    settings: Settings,
    topology: Topology,
    nats_client: NATS,
    js: JetStreamContext,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The warm start ends while a renewal is applied on the server and its answer is on the
    way: cut off there, the replica kept the old revision and lost the lease at its next renewal."""
    settings.consumer.rules_lease_ttl_s = 1.5  # renewed every 0.5 s
    warm_start, update = RulesService.warm_start, KeyValue.update
    applied, all_warm, answered = asyncio.Event(), asyncio.Event(), asyncio.Event()
    warmed: list[WarmStart] = []

    async def warming(
        self: RulesService, live_after: int | None = None, phases: Phases | None = None
    ) -> WarmStart:
        await applied.wait()  # ends right after a renewal reached the server
        warmed.append(await warm_start(self, live_after=live_after, phases=phases))
        if len(warmed) == settings.consumer.rules_partitions:
            all_warm.set()
        return warmed[-1]

    async def late_answer(self: KeyValue, key: str, value: bytes, last: int | None = None) -> int:
        revision = await update(self, key, value, last=last)
        if not applied.is_set():
            applied.set()
            await all_warm.wait()  # the answer comes after every warm start is over
            await asyncio.sleep(0.05)
            answered.set()
        return revision

    monkeypatch.setattr(RulesService, "warm_start", warming)
    monkeypatch.setattr(KeyValue, "update", late_answer)
    rules = replica(settings, topology, nats_client, "renewing")
    async with running(rules):
        await asyncio.sleep(2.0)  # several renewals on
        assert answered.is_set()
        assert sorted(rules.claimed) == list(range(settings.consumer.rules_partitions))
    assert "lost the lease" not in caplog.text


async def test_a_warm_start_busy_longer_than_a_lease_keeps_its_partitions(
    settings: Settings,
    topology: Topology,
    nats_client: NATS,
    js: JetStreamContext,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Not a wait but CPU: judging each run takes the loop (a loaded machine's milliseconds, made
    longer here), and each partition's replay alone judges runs for longer than the lease. Done
    in one go, the renewals waited behind it and the leases expired: the replica lost the
    partitions it was warm-starting and started them again."""
    # renewed every second: a loaded machine (the suite's other workers) may hold a process or the
    # server for a good part of a second, which a 1.5 s lease did not always outlast
    settings.consumer.rules_lease_ttl_s = 3.0
    events = [e for k in range(200) for e in story(k, 0, oom=False)]  # 200 runs, 1,200 events
    assert await Publisher(js, topology).publish(events) == len(events)
    evaluate = RuleEngine._evaluate

    def busy(self: RuleEngine, run: HeldRun, now: datetime) -> list[Finding]:
        time.sleep(0.01)  # CPU, as the loop sees it: nothing else runs meanwhile
        return evaluate(self, run, now)

    monkeypatch.setattr(RuleEngine, "_evaluate", busy)
    try:
        rules = replica(settings, topology, nats_client, "busy")
        async with running(rules):
            # each partition replays about 600 events, 6 s of judging against a 3 s lease
            assert sorted(rules.claimed) == list(range(settings.consumer.rules_partitions))
            assert sum(w.replayed for w in rules.warm_starts) == len(events)
            monkeypatch.undo()  # the live ticks of 200 runs as cheap as they are
            await asyncio.sleep(3.0)  # a few heartbeats on: nothing was lost and started again
            assert sorted(rules.claimed) == list(range(settings.consumer.rules_partitions))
            assert len(rules.warm_starts) == settings.consumer.rules_partitions
        assert "lost the lease" not in caplog.text
    finally:
        await drop_buckets(js, topology)
