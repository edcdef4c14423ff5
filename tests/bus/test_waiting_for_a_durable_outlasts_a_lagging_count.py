"""Waiting for a durable to have consumed its stream does not trust the server's pending counts
alone: the server acknowledges a publish before its signal queue has counted the message for the
stream's consumers, so a consumer asked at once can show nothing pending. The wait holds until
the durable has delivered its filter's last message, and all of it is acknowledged."""

from __future__ import annotations

import dataclasses

import pytest
from nats.js.api import ConsumerConfig, ConsumerInfo

from controller.bus.streams import wait_until_consumed
from tests.conftest import Stage


async def take_all(stage: Stage, durable: str) -> int:
    """Pull and acknowledge everything ``durable`` has to give; how many messages that was."""
    sub = await stage.js.pull_subscribe_bind(durable, stage.topology.stream("jobs"))
    taken = 0
    try:
        while msgs := await sub.fetch(100, timeout=1):
            for msg in msgs:
                await msg.ack_sync()
            taken += len(msgs)
    except TimeoutError:
        pass
    finally:
        await sub.unsubscribe()
    return taken


async def publish(stage: Stage, namespace: str, count: int) -> int:
    """``count`` messages in ``namespace``; the stream sequence of the last."""
    last = 0
    for i in range(count):
        subject = f"{stage.topology.prefix}.jobs.{namespace}.j{i}.job"
        last = (await stage.js.publish(subject, b"{}")).seq
    return last


async def test_a_count_that_lags_the_publish_does_not_end_the_wait(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream, durable = stage.topology.stream("jobs"), stage.topology.durable("lagging")
    await stage.js.add_consumer(stream, ConsumerConfig(durable_name=durable, ack_wait=5))
    last = await publish(stage, "team-a", 12)
    answer = stage.js.consumer_info

    async def before_the_signal(stream: str, consumer: str) -> ConsumerInfo:
        # what the server answers before its signal queue has reached the consumer
        info: ConsumerInfo = await answer(stream, consumer)
        return dataclasses.replace(info, num_pending=0)

    monkeypatch.setattr(stage.js, "consumer_info", before_the_signal)
    with pytest.raises(TimeoutError, match=f"delivered up to 0 of {last}"):
        await wait_until_consumed(stage.js, stream, durable, timeout_s=0.3)

    assert await take_all(stage, durable) == 12
    await wait_until_consumed(stage.js, stream, durable, timeout_s=10)


async def test_a_filtered_durable_waits_for_its_own_messages_only(stage: Stage) -> None:
    stream, durable = stage.topology.stream("jobs"), stage.topology.durable("team_a")
    mine = f"{stage.topology.prefix}.jobs.team-a.>"
    await stage.js.add_consumer(stream, ConsumerConfig(durable_name=durable, filter_subject=mine, ack_wait=5))
    await publish(stage, "team-a", 5)
    await publish(stage, "team-b", 7)  # after its last: the durable never delivers these

    assert await take_all(stage, durable) == 5
    await wait_until_consumed(stage.js, stream, durable, timeout_s=10)
