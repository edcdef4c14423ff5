"""A settled batch is acknowledged message by message, each with its own ack (never an AckAll:
replicas sharing a durable hold each other's messages), handed to the client in one write
(issue 40, the history consumer's CPU per message): the server counts every one acknowledged,
none is delivered again, and what :meth:`Msg.ack` refuses is refused as before."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import MsgAlreadyAckdError, NotJSMessageError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from controller.bus.settling import ack_all
from controller.contract.subjects import Topology
from controller.testing.waits import until


@pytest.fixture
async def stream(js: JetStreamContext, topology: Topology) -> AsyncIterator[tuple[str, str]]:
    """A stream of this test's own and its subject."""
    name = topology.stream("jobs") + "_ACKS"
    await js.add_stream(StreamConfig(name=name, subjects=[f"{topology.prefix}.acks.>"]))
    yield name, f"{topology.prefix}.acks.m"
    with contextlib.suppress(Exception):
        await js.delete_stream(name)


async def test_every_message_is_acknowledged_and_none_comes_again(
    js: JetStreamContext, stream: tuple[str, str]
) -> None:
    name, subject = stream
    for n in range(20):
        await js.publish(subject, f"m{n}".encode())
    sub = await js.pull_subscribe(
        subject, durable="acks", stream=name, config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=1)
    )
    msgs = await sub.fetch(20, timeout=5)
    assert len(msgs) == 20

    await ack_all(msgs[:15])
    await ack_all(msgs[15:])
    await js._nc.flush()

    seen: list[tuple[int, int, int]] = []

    async def all_acknowledged() -> bool:  # the server takes acks off its own queue, after the flush
        info = await js.consumer_info(name, "acks")
        seen.append((info.num_ack_pending, info.num_pending, info.ack_floor.stream_seq))
        return seen[-1] == (0, 0, 20)

    await until(all_acknowledged, 10, lambda: f"(ack pending, pending, ack floor) stayed {seen[-1:]}")
    with pytest.raises(NatsTimeoutError):  # past ack_wait: nothing is delivered again
        await sub.fetch(1, timeout=1.5)
    with pytest.raises(MsgAlreadyAckdError):
        await ack_all(msgs[:1])


async def test_a_message_not_from_jetstream_is_refused_as_msg_ack_refuses_it(nats_client: NATS) -> None:
    with pytest.raises(NotJSMessageError):
        await ack_all([Msg(nats_client, subject="core.subject", reply="", data=b"")])
