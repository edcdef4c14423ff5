"""A log tail with a NUL byte (PostgreSQL text cannot hold one) is stored, cleaned, not dead-lettered;
a secret in it never reaches the history."""

from __future__ import annotations

import dataclasses

from sqlalchemy import select

from controller.store.models import PodStateRow
from controller.testing.stories import oom_story
from tests.conftest import Stage
from tests.pipeline_fixtures import consumers_running

TAIL = ("Epoch 3 step 1200 loss 2.31", "binary\x00garbage\x01here", "token=abc123secret", "Killed")


async def test_a_log_tail_with_nul_is_stored_clean(stage: Stage) -> None:
    story = oom_story()
    assert story[-2].log_tail  # the OOMKilled worker's update carries the tail
    story[-2] = dataclasses.replace(story[-2], log_tail=TAIL)
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        await stage.feed(story)
        await stage.consumed()
        dead = await stage.js.stream_info(stage.topology.stream("dlq"))
    async with stage.engine.connect() as conn:
        tails = [t for t in (await conn.execute(select(PodStateRow.log_tail))).scalars() if t]
    assert tails == [["Epoch 3 step 1200 loss 2.31", "binary garbage here", "token=[REDACTED]", "Killed"]]
    assert dead.state.messages == 0
