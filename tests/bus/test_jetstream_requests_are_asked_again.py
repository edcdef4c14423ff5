"""JetStream API requests are asked again while a cluster cannot answer them
(:mod:`controller.bus.answering`): a leader being elected, a stream not yet known to the server
asked. A wrong request is not, and a cluster that never answers is given up on in time."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, KeyValueConfig, StreamConfig
from nats.js.errors import BadRequestError, BucketNotFoundError, NotFoundError, ServiceUnavailableError

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


async def _asked(errors: list[Exception], **options: Any) -> tuple[object, int]:
    """What :func:`until_answered` returns, or the error it raises, for a request that raises
    ``errors`` in turn before it answers ``"answered"``; and how often the request was asked."""
    calls = 0

    async def request() -> str:
        nonlocal calls
        calls += 1
        if errors:
            raise errors.pop(0)
        return "answered"

    try:
        answer: object = await until_answered(request, "test", **options)
    except Exception as exc:  # the error is the answer looked at
        answer = exc
    return answer, calls


async def test_an_election_in_progress_is_asked_again_until_answered() -> None:
    assert await _asked([ServiceUnavailableError(), NoRespondersError(), TimeoutError()]) == ("answered", 4)


async def test_a_missing_stream_is_asked_again_only_where_it_must_exist() -> None:
    error, calls = await _asked([NotFoundError()])
    assert isinstance(error, NotFoundError) and calls == 1

    assert await _asked([NotFoundError()], missing=True) == ("answered", 2)


async def test_a_wrong_request_is_not_asked_again() -> None:
    error, calls = await _asked([BadRequestError()])

    assert isinstance(error, BadRequestError) and calls == 1


async def test_a_cluster_that_never_answers_is_given_up_on() -> None:
    error, calls = await _asked([ServiceUnavailableError() for _ in range(1000)], within_s=0.3)

    assert isinstance(error, ServiceUnavailableError) and 1 < calls < 1000


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


class _ElectingBucket:
    """A JetStream context where the bucket does not exist yet, and its new stream reports a cluster
    without a leader ``unled`` times before its leader is elected."""

    def __init__(self, unled: int) -> None:
        self.unled, self.asked = unled, 0
        self.bucket = object()

    async def key_value(self, bucket: str) -> object:
        raise BucketNotFoundError()

    async def create_key_value(self, config: KeyValueConfig) -> object:
        return self.bucket

    async def stream_info(self, stream: str) -> SimpleNamespace:
        self.asked += 1
        leader = None if self.asked <= self.unled else "nats-1"
        return SimpleNamespace(cluster=SimpleNamespace(leader=leader, name="c"))


async def test_a_bucket_just_created_is_returned_once_its_stream_has_a_leader() -> None:
    js = _ElectingBucket(unled=2)

    opened = await open_bucket(js, KeyValueConfig(bucket="electing", replicas=3))  # type: ignore[arg-type]

    assert opened is js.bucket and js.asked == 3  # asked until the leader was there, not once more
