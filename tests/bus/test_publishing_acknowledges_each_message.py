"""Every message published gets its own outcome, in order: stored, stored before (duplicate),
refused by the stream, not taken by any stream, not answered in time, or not even sent."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client as NATS
from nats.errors import MaxPayloadError
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, PubAck, StreamConfig
from nats.js.errors import APIError, NoStreamResponseError

from controller.bus import publishing as publishing_module
from controller.bus.publishing import Outgoing, publish, stored_anew
from controller.contract.errors import RetryableError
from controller.contract.subjects import Topology


@pytest.fixture
async def subject(js: JetStreamContext, topology: Topology) -> AsyncIterator[str]:
    """A stream of this test's own, holding at most 5 messages (a sixth is refused)."""
    name = topology.stream("jobs") + "_PUB"
    await js.add_stream(
        StreamConfig(name=name, subjects=[f"{topology.prefix}.pub.>"], max_msgs=5, discard=DiscardPolicy.NEW)
    )
    yield f"{topology.prefix}.pub.m"
    with contextlib.suppress(Exception):
        await js.delete_stream(name)


def messages(subject: str, ids: range) -> list[Outgoing]:
    return [Outgoing(subject, f"payload {n}".encode(), f"id-{n}") for n in ids]


async def test_each_message_is_acknowledged_in_order_and_repeats_are_duplicates(
    js: JetStreamContext, subject: str
) -> None:
    first = await publish(js, messages(subject, range(3)))
    again = await publish(js, messages(subject, range(1, 4)))

    assert all(isinstance(ack, PubAck) for ack in first + again)
    assert [ack.seq for ack in first] == [1, 2, 3]  # type: ignore[union-attr]
    assert [bool(ack.duplicate) for ack in again] == [True, True, False]  # type: ignore[union-attr]
    assert stored_anew(first) == 3 and stored_anew(again) == 1


async def test_what_the_stream_refuses_is_that_messages_error(js: JetStreamContext, subject: str) -> None:
    results = await publish(js, messages(subject, range(7)))

    assert [type(result).__name__ for result in results[:5]] == ["PubAck"] * 5
    assert all(isinstance(result, APIError) for result in results[5:])
    assert "maximum messages exceeded" in str(results[5])


async def test_a_subject_no_stream_takes_is_a_retryable_failure(
    js: JetStreamContext, topology: Topology
) -> None:
    results = await publish(js, messages(f"{topology.prefix}.nowhere", range(2)))

    assert all(isinstance(result, NoStreamResponseError) for result in results)
    with pytest.raises(RetryableError, match="not published"):
        stored_anew(results)


async def test_an_ack_that_never_comes_is_a_timeout(
    nats_client: NATS, js: JetStreamContext, topology: Topology
) -> None:
    swallowed: list[str] = []

    async def swallow(msg: object) -> None:  # a responder that never answers (a server that died)
        swallowed.append("x")

    sub = await nats_client.subscribe(f"{topology.prefix}.void", cb=swallow)
    try:
        results = await publish(js, messages(f"{topology.prefix}.void", range(2)), ack_timeout_s=0.3)
    finally:
        await sub.unsubscribe()

    assert [str(result) for result in results] == ["no ack within 0.3s"] * 2
    assert all(isinstance(result, TimeoutError) for result in results)
    assert len(swallowed) == 2


async def test_a_message_the_client_will_not_send_stops_the_rest(
    nats_client: NATS, js: JetStreamContext, subject: str
) -> None:
    too_big = Outgoing(subject, b"x" * (nats_client.max_payload + 1), "too-big")
    results = await publish(js, [*messages(subject, range(2)), too_big, *messages(subject, range(2, 4))])

    assert [isinstance(result, PubAck) for result in results[:2]] == [True, True]
    assert all(isinstance(result, MaxPayloadError) for result in results[2:])


async def test_concurrent_batches_on_one_connection_keep_their_own_outcomes(
    js: JetStreamContext, subject: str, topology: Topology
) -> None:
    stored, nowhere = await asyncio.gather(
        publish(js, messages(subject, range(3))),
        publish(js, messages(f"{topology.prefix}.nowhere", range(3))),
    )

    assert all(isinstance(result, PubAck) for result in stored)
    assert all(isinstance(result, NoStreamResponseError) for result in nowhere)


async def test_a_publish_cancelled_as_its_last_ack_arrives_is_cancelled(
    js: JetStreamContext, subject: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled in the same turn of the loop as its last ack arrives, a publish raises
    ``CancelledError`` rather than returning: a log follow stopped then stops (on Python 3.11,
    ``asyncio.wait_for`` returned the acks and the follow went on)."""
    publishing: list[asyncio.Task[object]] = []
    settle = publishing_module._Batch.settle

    def settle_then_cancel(batch: publishing_module._Batch, index: int, result: object) -> None:
        settle(batch, index, result)  # type: ignore[arg-type]
        if batch.done.is_set():
            publishing[0].cancel()

    monkeypatch.setattr(publishing_module._Batch, "settle", settle_then_cancel)
    task = asyncio.create_task(publish(js, messages(subject, range(2))))
    publishing.append(task)
    with pytest.raises(asyncio.CancelledError):
        await task
