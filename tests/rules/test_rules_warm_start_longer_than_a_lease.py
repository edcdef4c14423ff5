"""A rules replica keeps the partitions it warm-starts, however long the warm start takes.

On a big cluster a partition's warm start (its snapshot: hundreds of runs, and the findings on
the bus) took 4 s, most of the 6 s lease: the leases expired before the replica's first
renewal, it lost its partitions and warm-started them all over again, and findings waited.
Leases are now renewed while partitions warm up.
"""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from consumers.rules import RulesService, WarmStart
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from tests.rules.replicas import replica, running


async def test_partitions_warming_up_longer_than_their_lease_are_kept(
    settings: Settings,
    topology: Topology,
    nats_client: NATS,
    js: JetStreamContext,  # the streams declared
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings.consumer.rules_lease_ttl_s = 1.5  # renewed every 0.5 s
    warm_start = RulesService.warm_start

    async def slow(self: RulesService, live_after: int | None = None) -> WarmStart:
        await asyncio.sleep(3.0)  # twice the lease
        return await warm_start(self, live_after=live_after)

    monkeypatch.setattr(RulesService, "warm_start", slow)
    rules = replica(settings, topology, nats_client, "slow")
    async with running(rules):
        assert sorted(rules.claimed) == list(range(settings.consumer.rules_partitions))
        await asyncio.sleep(2.0)  # a few heartbeats on: nothing was lost and started again
        assert sorted(rules.claimed) == list(range(settings.consumer.rules_partitions))
        assert len(rules.warm_starts) == settings.consumer.rules_partitions
