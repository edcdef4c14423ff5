"""A durable's messages come in batches as soon as they are there, and an idle durable is not polled.

Real JetStream for what the server does (one-shot requests, batches, replicas sharing a durable,
a deleted durable); a fake JetStream peer on real NATS for what a server rarely does on cue (a
request lost with its server, no responders while a leader is elected): it subscribes to the
pull-request subject and answers, or not, like a server would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from controller.bus.pulling import Puller, PullError
from controller.bus.streams import connect
from controller.contract.subjects import Topology
from controller.testing.waits import until
from tests.conftest import Services

CONFIG = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, max_ack_pending=5_000)


@pytest.fixture
async def stream(js: JetStreamContext, topology: Topology) -> AsyncIterator[str]:
    name = topology.stream("jobs") + "_PULL"
    await js.add_stream(StreamConfig(name=name, subjects=[f"{topology.prefix}.pull.>"]))
    yield name
    with contextlib.suppress(Exception):
        await js.delete_stream(name)


async def publish(js: JetStreamContext, topology: Topology, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        await js.publish_async(f"{topology.prefix}.pull.m", str(n).encode())
    await js.publish_async_completed()


@contextlib.asynccontextmanager
async def requests_seen(nc: NATS, stream: str, durable: str) -> AsyncIterator[list[dict[str, object]]]:
    """Every pull request sent for ``durable``, as a bystander on the bus sees them."""
    seen: list[dict[str, object]] = []

    async def note(msg: Msg) -> None:
        seen.append(json.loads(msg.data))

    sub = await nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}", cb=note)
    try:
        yield seen
    finally:
        await sub.unsubscribe()


async def test_an_idle_durable_holds_one_request_instead_of_polling(nats_client: NATS, stream: str) -> None:
    async with requests_seen(nats_client, stream, "idle") as seen:
        puller = await Puller.open(nats_client, stream, "idle", CONFIG, batch=500, wait_s=30, heartbeat_s=0.2)
        pulling = asyncio.create_task(puller.pull())
        await asyncio.sleep(1.5)  # seven heartbeats long: a poller would have asked again and again
        assert not pulling.done()
        puller.interrupt()
        assert await asyncio.wait_for(pulling, 5) == []
        await puller.close()
    assert len(seen) == 1
    assert seen[0] == {
        "batch": 500,
        "expires": 30_000_000_000,
        "no_wait": True,
        "idle_heartbeat": 200_000_000,
        "max_bytes": 32 * 1024 * 1024,  # a batch of large messages cannot make it a slow consumer
    }


async def test_a_message_published_while_waiting_is_handed_over_alone_at_once(
    nats_client: NATS, js: JetStreamContext, topology: Topology, stream: str
) -> None:
    puller = await Puller.open(nats_client, stream, "trickle", CONFIG, batch=500, wait_s=30, heartbeat_s=5)
    pulling = asyncio.create_task(puller.pull())
    await asyncio.sleep(0.2)
    await publish(js, topology, 1)
    (msg,) = await asyncio.wait_for(pulling, 10)  # not the 30 s a batch of 500 could wait to fill
    assert msg.data == b"0"
    await msg.ack()
    await puller.close()


async def test_a_backlog_comes_in_full_batches_then_the_rest(
    nats_client: NATS, js: JetStreamContext, topology: Topology, stream: str
) -> None:
    await publish(js, topology, 1_200)
    puller = await Puller.open(nats_client, stream, "backlog", CONFIG, batch=500, wait_s=30, heartbeat_s=5)
    sizes, data = [], []
    while sum(sizes) < 1_200:
        batch = await asyncio.wait_for(puller.pull(), 10)
        sizes.append(len(batch))
        data += [int(msg.data) for msg in batch]
        for msg in batch:
            await msg.ack()
    await puller.close()
    assert sizes == [500, 500, 200]
    assert data == list(range(1_200))


async def test_replicas_share_a_durable_each_message_once(
    services: Services, nats_client: NATS, js: JetStreamContext, topology: Topology, stream: str
) -> None:
    other = await connect(services.nats_url, "another-replica")
    pullers = [
        await Puller.open(nc, stream, "shared", CONFIG, batch=50, wait_s=30, heartbeat_s=5)
        for nc in (nats_client, other)
    ]
    got: list[list[int]] = [[], []]

    async def consume(n: int) -> None:
        while sum(map(len, got)) < 2_000:
            for msg in await pullers[n].pull():
                got[n].append(int(msg.data))
                await msg.ack()

    consumers = [asyncio.create_task(consume(n)) for n in (0, 1)]
    for start in range(0, 2_000, 100):  # a steady stream, both replicas waiting for it
        await publish(js, topology, 100, start)
        await asyncio.sleep(0.01)
    try:  # one replica ends on the last message; the other's pull still waits (wait_s) for more: end it
        await until(lambda: any(c.done() for c in consumers), 30, lambda: list(map(len, got)))
    finally:
        for puller in pullers:
            puller.interrupt()
    await asyncio.gather(*consumers)  # a replica's error, if one ended with one
    for puller in pullers:
        await puller.close()
    await other.close()
    assert sorted(got[0] + got[1]) == list(range(2_000)), "every message once"
    assert got[0] and got[1], "both replicas took a share"


async def test_a_deleted_durable_is_an_error_not_silence(
    nats_client: NATS, js: JetStreamContext, stream: str
) -> None:
    puller = await Puller.open(nats_client, stream, "doomed", CONFIG, batch=10, wait_s=30, heartbeat_s=5)
    pulling = asyncio.create_task(puller.pull())
    await asyncio.sleep(0.2)
    await js.delete_consumer(stream, "doomed")
    with pytest.raises(PullError, match="doomed: 409 Consumer Deleted"):
        await asyncio.wait_for(pulling, 10)
    await puller.close()


@contextlib.asynccontextmanager
async def fake_jetstream(nc: NATS, answers: list[list[dict[str, str]]]) -> AsyncIterator[list[float]]:
    """A peer answering pull requests for stream S, durable D: request n gets ``answers[n]``
    (each an empty-bodied message with those headers, a status like a server's); a request
    beyond the list gets no answer at all. Yields the times requests arrived."""
    arrived: list[float] = []

    async def answer(msg: Msg) -> None:
        arrived.append(asyncio.get_running_loop().time())
        for headers in answers[len(arrived) - 1] if len(arrived) <= len(answers) else []:
            await nc.publish(msg.reply, b"" if "Status" in headers else b"payload", headers=headers or None)

    sub = await nc.subscribe("$JS.API.CONSUMER.MSG.NEXT.S.D", cb=answer)
    try:
        yield arrived
    finally:
        await sub.unsubscribe()


async def test_a_request_lost_with_its_server_is_asked_again(nats_client: NATS) -> None:
    # 1st request: heartbeats, then silence (its server went away); 2nd: a message, then the end
    answers = [[{"Status": "100", "Description": "Idle Heartbeat"}], [{}, {"Status": "404"}]]
    async with fake_jetstream(nats_client, answers) as arrived:
        puller = Puller(nats_client, "S", "D", batch=10, wait_s=30, heartbeat_s=0.2)
        await puller.start()
        assert await asyncio.wait_for(puller.pull(), 10) == [], "nothing came of the lost request"
        batch = await asyncio.wait_for(puller.pull(), 10)
        await puller.close()
    assert [msg.data for msg in batch] == [b"payload"]
    assert len(arrived) == 2
    assert arrived[1] - arrived[0] >= 0.2 * 2, "asked again only once two heartbeats were missed"


async def test_no_responders_is_waited_out_with_backoff(nats_client: NATS) -> None:
    answers = [[{"Status": "503"}], [{"Status": "503"}], [{}, {}, {"Status": "404"}]]
    async with fake_jetstream(nats_client, answers) as arrived:
        puller = Puller(nats_client, "S", "D", batch=10, wait_s=30, heartbeat_s=5, busy_s=0.05)
        await puller.start()
        batch = await asyncio.wait_for(puller.pull(), 10)
        while not batch:
            batch = await asyncio.wait_for(puller.pull(), 10)
        await puller.close()
    assert len(batch) == 2
    assert len(arrived) == 3
    assert arrived[1] - arrived[0] >= 0.05 and arrived[2] - arrived[1] >= 0.1, "waits, doubling"


async def test_a_request_ended_at_its_max_bytes_is_followed_by_the_next(nats_client: NATS) -> None:
    # a request that reached its max_bytes ends with 409 Batch Completed: not a refusal (seen while
    # a JOBS leader was killed under a notify consumer, which exited with PullError)
    answers = [[{"Status": "409", "Description": "Batch Completed"}], [{}, {"Status": "404"}]]
    async with fake_jetstream(nats_client, answers) as arrived:
        puller = Puller(nats_client, "S", "D", batch=10, wait_s=30, heartbeat_s=5)
        await puller.start()
        batch = await asyncio.wait_for(puller.pull(), 10)
        while not batch:
            batch = await asyncio.wait_for(puller.pull(), 10)
        await puller.close()
    assert [msg.data for msg in batch] == [b"payload"]
    assert len(arrived) == 2


async def test_an_unknown_refusal_is_an_error(nats_client: NATS) -> None:
    answers = [[{"Status": "400", "Description": "Bad Request - heartbeat value too large"}]]
    async with fake_jetstream(nats_client, answers):
        puller = Puller(nats_client, "S", "D", batch=10, wait_s=30, heartbeat_s=5)
        await puller.start()
        with pytest.raises(PullError, match="S/D: 400 Bad Request - heartbeat value too large"):
            await asyncio.wait_for(puller.pull(), 10)
        await puller.close()


def test_impossible_timings_are_refused(nats_client: NATS) -> None:
    with pytest.raises(ValueError, match="heartbeat_s"):
        Puller(nats_client, "S", "D", batch=10, wait_s=1, heartbeat_s=1)
