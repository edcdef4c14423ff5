"""The bus's door retries what JetStream did not store: no stream answering (a leader being
elected) is published again with backoff until the bound, then a RetryableError; a stream that
answers again before the bound stores every message once; a message the stream refuses is not
retried."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import pytest
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, PubAck, StreamConfig
from nats.js.errors import APIError, NoStreamResponseError

from controller.bus.publishing import Outgoing, publish_acked, publish_stored
from controller.contract.errors import RetryableError
from controller.contract.subjects import Topology
from controller.testing.waits import until

RETRY = "publishing again"


@pytest.fixture
async def stream(js: JetStreamContext, topology: Topology) -> AsyncIterator[StreamConfig]:
    """A stream of this test's own, not created yet: until it is, nothing answers its subject."""
    config = StreamConfig(name=topology.stream("jobs") + "_LATE", subjects=[f"{topology.prefix}.late.>"])
    yield config
    with contextlib.suppress(Exception):
        await js.delete_stream(config.name or "")


def messages(topology: Topology, count: int) -> list[Outgoing]:
    return [Outgoing(f"{topology.prefix}.late.m", f"payload {n}".encode(), f"late-{n}") for n in range(count)]


def retries(caplog: pytest.LogCaptureFixture) -> int:
    return sum(RETRY in record.getMessage() for record in caplog.records)


async def test_no_stream_answering_is_retried_until_the_bound_then_retryable(
    js: JetStreamContext, topology: Topology, stream: StreamConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="controller.bus.publishing")

    with pytest.raises(RetryableError, match="NoStreamResponseError") as raised:
        await publish_stored(js, messages(topology, 3), retry_s=1.0)

    assert isinstance(raised.value.__cause__, NoStreamResponseError)
    assert retries(caplog) >= 2  # backoff from 50 ms: several tries fit in a second


async def test_a_publish_waiting_for_its_stream_stores_each_message_once_when_it_answers(
    js: JetStreamContext, topology: Topology, stream: StreamConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="controller.bus.publishing")
    publishing = asyncio.create_task(publish_acked(js, messages(topology, 3), retry_s=60.0))
    await until(lambda: retries(caplog) >= 1, what=lambda: caplog.text)
    assert not publishing.done()

    await js.add_stream(stream)  # the stream's leader answers again
    results = await publishing

    assert [getattr(result, "seq", result) for result in results] == [1, 2, 3]
    assert (await js.stream_info(stream.name or "")).state.messages == 3
    assert await publish_stored(js, messages(topology, 3)) == 0  # stored before: duplicates only


async def test_a_message_the_stream_refuses_is_not_published_again(
    js: JetStreamContext, topology: Topology, stream: StreamConfig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="controller.bus.publishing")
    stream.max_msgs, stream.discard = 1, DiscardPolicy.NEW  # a second message is refused
    await js.add_stream(stream)

    results = await publish_acked(js, messages(topology, 2), retry_s=60.0)

    assert isinstance(results[0], PubAck)
    assert isinstance(results[1], APIError) and "maximum messages exceeded" in str(results[1])
    assert retries(caplog) == 0
