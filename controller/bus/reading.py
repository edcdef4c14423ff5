"""Reading a stream from one sequence up to another, without acknowledging anything.

A warm start (the rules consumer's) reads what is already on a stream: an ephemeral pull
consumer in memory, batched fetches, deleted when the read ends (or by the server, after
``inactive_threshold``, if the reader dies). Bounded by ``upto``, the stream's last sequence
when the read began, so messages published meanwhile are left to the durable.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

from controller.bus.answering import until_answered

__all__ = ["last_sequence", "read_stream"]

_FETCH_TIMEOUT_S = 2.0
_IDLE_FETCHES = 3  # fetches in a row that bring nothing before a read gives up
_IDLE_S = 30.0  # the server deletes an abandoned reader after this


async def last_sequence(js: JetStreamContext, stream: str) -> int:
    """The sequence of the last message of ``stream`` (0 when it holds none); asked again while
    the cluster cannot answer (:func:`controller.bus.answering.until_answered`)."""
    info = await until_answered(lambda: js.stream_info(stream), f"stream {stream}")
    return info.state.last_seq if info.state.messages else 0


async def read_stream(
    js: JetStreamContext, stream: str, subject: str, upto: int, batch: int, start: int = 1
) -> AsyncIterator[Msg]:
    """Messages of ``stream`` on ``subject`` from sequence ``start`` (or its first) up to ``upto``,
    in order, ``batch`` per fetch, without acks."""
    if upto <= 0 or start > upto:
        return
    config = ConsumerConfig(
        ack_policy=AckPolicy.NONE,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE if start > 1 else DeliverPolicy.ALL,
        opt_start_seq=start if start > 1 else None,
        mem_storage=True,
        num_replicas=1,
        inactive_threshold=_IDLE_S,
    )
    sub = await until_answered(
        lambda: js.pull_subscribe(subject, stream=stream, config=config), f"reader of {stream}"
    )
    name = (await until_answered(sub.consumer_info, f"reader of {stream}")).name
    idle = 0
    try:
        while True:
            try:
                msgs = await sub.fetch(batch, timeout=_FETCH_TIMEOUT_S)
            except TimeoutError:  # nats-py's own, or asyncio's from inside the client
                # Nothing came: the rest aged out of the stream while we read, or the server
                # is slow to answer. ``num_pending`` is not trusted to say so (it can read 0
                # before the end), so only ``upto`` or repeated silence ends the read.
                idle += 1
                if idle >= _IDLE_FETCHES or (await last_sequence(js, stream)) < upto:
                    return
                continue
            idle = 0
            for msg in msgs:
                sequence = msg.metadata.sequence.stream
                if sequence > upto:
                    return
                yield msg
                if sequence == upto:
                    return
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await js.delete_consumer(stream, name)
