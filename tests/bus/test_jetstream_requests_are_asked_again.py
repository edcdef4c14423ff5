"""JetStream API requests are asked again while a cluster cannot answer them
(:mod:`controller.bus.answering`): a leader being elected, a stream not yet known to the server
asked. A wrong request is not, and a cluster that never answers is given up on in time."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, KeyValueConfig, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError, ServiceUnavailableError

from controller.bus.answering import until_answered
from controller.bus.buckets import open_bucket
from controller.bus.publishing import Outgoing, publish_stored
from controller.bus.pulling import Puller
from controller.bus.reading import last_sequence, read_stream
from controller.bus.streams import connect
from controller.testing.natscluster import NatsCluster


@contextlib.asynccontextmanager
async def _cluster(tmp_path: Path) -> AsyncIterator[tuple[NatsCluster, NATS, JetStreamContext]]:
    """A 3-server JetStream cluster and a connection to it."""
    with NatsCluster(tmp_path / "nats") as cluster:
        nc = await connect(cluster.url, "answering")
        try:
            yield cluster, nc, nc.jetstream()
        finally:
            await nc.close()


async def _replicated_stream(js: JetStreamContext, name: str, messages: int) -> None:
    """Stream ``name`` (subjects ``<name>.>``, three replicas) holding ``messages`` numbered messages."""
    subject = name.lower()
    await until_answered(
        lambda: js.add_stream(StreamConfig(name=name, subjects=[f"{subject}.>"], num_replicas=3)), "create"
    )
    # through the bus's publishing door: a stream just created may have no leader yet to answer
    numbered = [Outgoing(f"{subject}.{n}", str(n).encode(), f"{name}-{n}") for n in range(messages)]
    assert await publish_stored(js, numbered) == messages


def _failing(errors: list[Exception]) -> tuple[Callable[[], Awaitable[str]], list[int]]:
    """A request that raises ``errors`` in turn, then answers ``"answered"``; and its call count."""
    calls = [0]

    async def request() -> str:
        calls[0] += 1
        if errors:
            raise errors.pop(0)
        return "answered"

    return request, calls


async def test_an_election_in_progress_is_asked_again_until_answered() -> None:
    request, calls = _failing([ServiceUnavailableError(), NoRespondersError(), TimeoutError()])

    assert await until_answered(request, "test") == "answered"
    assert calls == [4]


async def test_a_missing_stream_is_asked_again_only_where_it_must_exist() -> None:
    request, calls = _failing([NotFoundError()])
    with pytest.raises(NotFoundError):
        await until_answered(request, "test")
    assert calls == [1]

    request, calls = _failing([NotFoundError()])
    assert await until_answered(request, "test", missing=True) == "answered"
    assert calls == [2]


async def test_a_wrong_request_is_not_asked_again() -> None:
    request, calls = _failing([BadRequestError()])

    with pytest.raises(BadRequestError):
        await until_answered(request, "test")
    assert calls == [1]


async def test_a_cluster_that_never_answers_is_given_up_on() -> None:
    request, calls = _failing([ServiceUnavailableError() for _ in range(1000)])

    with pytest.raises(ServiceUnavailableError):
        await until_answered(request, "test", within_s=0.3)
    assert 1 < calls[0] < 1000


@pytest.mark.slow
async def test_buckets_open_and_read_while_their_leader_is_elected(tmp_path: Path) -> None:
    async with _cluster(tmp_path) as (cluster, _, js):
        created = await open_bucket(js, KeyValueConfig(bucket="answering", replicas=3))
        await created.put("key", b"value")  # a bucket just created answers at once

        cluster.kill(cluster.leader_of("KV_answering"))
        reopened = await open_bucket(js, KeyValueConfig(bucket="answering", replicas=3))
        entry = await until_answered(lambda: reopened.get("key"), "read")

    assert entry.value == b"value"


@pytest.mark.slow
async def test_a_stream_is_read_whole_while_its_leader_is_elected(tmp_path: Path) -> None:
    async with _cluster(tmp_path) as (cluster, _, js):
        await _replicated_stream(js, "READ", 50)

        cluster.kill(cluster.leader_of("READ"))
        upto = await last_sequence(js, "READ")
        read = [int(msg.data) async for msg in read_stream(js, "READ", "read.>", upto, 20)]

    assert read == list(range(50))


@pytest.mark.slow
async def test_a_durable_is_bound_and_pulled_while_its_stream_leader_is_elected(tmp_path: Path) -> None:
    async with _cluster(tmp_path) as (cluster, nc, js):
        await _replicated_stream(js, "PULL", 20)

        cluster.kill(cluster.leader_of("PULL"))
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=30, num_replicas=3)
        puller = await Puller.open(nc, "PULL", "answering", config, batch=50, wait_s=5, heartbeat_s=1)
        pulled: list[int] = []
        for _ in range(20):
            pulled += [int(msg.data) for msg in await puller.pull()]
            if len(pulled) >= 20:
                break
        await puller.close()

    assert pulled == list(range(20))
