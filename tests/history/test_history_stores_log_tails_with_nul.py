"""A log tail with a NUL byte (PostgreSQL text cannot hold one) is stored, cleaned, not dead-lettered;
a secret in it never reaches the history."""

from __future__ import annotations

import dataclasses

from nats.js import JetStreamContext
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.publishing import Publisher
from controller.bus.streams import wait_until_consumed
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store.models import PodStateRow
from controller.testing.stories import oom_story
from tests.pipeline_fixtures import consumers_running
from watchers.pipeline import Pipeline

TAIL = ("Epoch 3 step 1200 loss 2.31", "binary\x00garbage\x01here", "token=abc123secret", "Killed")


async def test_a_log_tail_with_nul_is_stored_clean(
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> None:
    story = oom_story()
    assert story[-2].log_tail  # the OOMKilled worker's update carries the tail
    story[-2] = dataclasses.replace(story[-2], log_tail=TAIL)
    async with consumers_running(settings, topology, engine, metrics):
        await Pipeline(Publisher(js, topology).publish, metrics, 5).feed(story)
        await wait_until_consumed(js, topology.stream("jobs"), topology.durable("history"))
        dead = await js.stream_info(topology.stream("dlq"))
    async with engine.connect() as conn:
        tails = [t for t in (await conn.execute(select(PodStateRow.log_tail))).scalars() if t]
    assert tails == [["Epoch 3 step 1200 loss 2.31", "binary garbage here", "token=[REDACTED]", "Killed"]]
    assert dead.state.messages == 0
