"""The ``LOGS`` stream as a store of followed log lines: write batches, find where a container's
log stands, read a run's batches back (once, or following new ones; parsed, or raw for a caller that parses
off its event loop).

One subject per container of a run (:meth:`Topology.log_subject`); its last message carries the
position following resumes from (:class:`~controller.contract.logs.LogPosition`), so a
restarted or replaced follower needs nothing but the bus. A follower publishes each batch on
condition that the subject's last message is still the one it resumed after or stored last
(``Nats-Expected-Last-Subject-Sequence``, :func:`publish_after`): two followers of one
container — a replica that lost its lease and has not noticed yet, and the one that took the
container over — cannot both store a line, whatever the order of their publishes. Reads are
ephemeral ordered pull consumers filtered on one run's subjects, without acks, gone when the
read ends (or after ``_IDLE_S`` if the reader dies).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, ConsumerInfo, DeliverPolicy, PubAck
from nats.js.errors import APIError, NotFoundError
from pydantic import ValidationError

from controller.bus.logshares import LogShares
from controller.bus.publishing import MSG_ID, Bursts, Outgoing, publish_acked, publish_stored, stored_anew
from controller.contract.logs import LogBatch, LogPosition, PackedBatch
from controller.contract.subjects import Topology

__all__ = [
    "LogsUnavailableError",
    "Raw",
    "Stored",
    "StoredEnd",
    "SupersededError",
    "parsed",
    "parsed_batches",
    "publish_after",
    "publish_batches",
    "read_raw",
    "stored_end",
    "stored_position",
    "subject_ends",
]

_FETCH = 16
"""Batches asked for per pull: at most 16 x 256 KiB of text (``batch_max_bytes``), well under
what a subscription holds before the server counts it a slow consumer."""
_IDLE_S = 30.0
_WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code for a publish whose expected last (subject) sequence is not the last."""


class LogsUnavailableError(Exception):
    """The ``LOGS`` stream cannot be read now (not declared, or the bus not answering)."""


class SupersededError(Exception):
    """Someone else stored a batch of the container since this follower's last one: it no longer
    follows it alone (its lease was lost, or is being taken over)."""


@dataclass(frozen=True, slots=True)
class StoredEnd:
    """Where a container's stored log ends, and the stream sequence of that last batch (0: none)."""

    position: LogPosition
    seq: int


@dataclass(frozen=True, slots=True)
class Stored:
    """A batch as the stream holds it: its sequence, when it was stored, what it says."""

    seq: int
    at: datetime
    batch: LogBatch


def subject_of(topology: Topology, batch: LogBatch) -> str:
    """The subject of a batch's container."""
    return topology.log_subject(batch.namespace, batch.job, batch.run_uid, batch.pod, batch.container)


async def publish_batches(
    js: JetStreamContext, topology: Topology, batches: Sequence[LogBatch | PackedBatch], retry_s: float
) -> int:
    """Store ``batches`` in order, each once (its id: where it ends); returns how many were new.
    Raises :class:`~controller.contract.errors.RetryableError` when the bus did not store one
    within ``retry_s``."""
    return await publish_stored(js, [outgoing(topology, batch) for batch in batches], retry_s)


def outgoing(topology: Topology, batch: LogBatch | PackedBatch, after: int | None = None) -> Outgoing:
    """A batch as it goes onto ``LOGS`` (stored only right after the subject's sequence ``after``,
    if given)."""
    if isinstance(batch, PackedBatch):
        subject = batch.subject or subject_of(topology, batch.head)
        return Outgoing(subject, batch.payload(), batch.head.msg_id, after)
    return Outgoing(
        subject_of(topology, batch),
        batch.model_dump_json(exclude_defaults=True).encode(),
        batch.msg_id,
        after,
    )


async def publish_after(
    js: JetStreamContext,
    topology: Topology,
    batches: Sequence[LogBatch | PackedBatch],
    seq: int,
    retry_s: float,
    shares: LogShares | None = None,
    bursts: Bursts | None = None,
) -> int:
    """Store ``batches`` of one container in order, each on condition that the container's last
    stored message is still the one before it (the first: the one at ``seq``, 0 for none);
    returns the sequence of the last. Raises :class:`SupersededError` when another follower
    stored one meanwhile (nothing more is stored), and as :func:`publish_batches` otherwise. A
    batch published again after a lost ack is found stored (the subject's last, with its id).
    Each batch stored is noted in its namespace's account in ``shares``. With ``bursts`` each
    batch goes out with those other containers' follows publish in the same turn of the loop
    (``retry_s`` is then the bursts' own)."""
    for batch in batches:
        message = outgoing(topology, batch, seq)
        if bursts is not None:
            result = await bursts.publish(message)
        else:
            (result,) = await publish_acked(js, [message], retry_s)
        if isinstance(result, APIError) and result.err_code == _WRONG_LAST_SEQUENCE:
            seq = await _stored_last(js, topology, message, seq)
        else:
            stored_anew([result])  # raises what was not stored
            assert isinstance(result, PubAck)
            seq = result.seq
        if shares is not None:
            namespace = batch.head.namespace if isinstance(batch, PackedBatch) else batch.namespace
            shares.record(namespace, seq, len(message.subject) + len(message.payload))
    return seq


async def _stored_last(js: JetStreamContext, topology: Topology, message: Outgoing, seq: int) -> int:
    """The sequence of ``message``, refused as not coming right after ``seq``, if it is the
    subject's last message all the same (its ack was lost, and the retry came after it);
    :class:`SupersededError` if another one is."""
    try:
        last = await js.get_last_msg(topology.stream("logs"), message.subject)
    except NotFoundError:
        last = None
    if last is not None and last.headers and last.headers.get(MSG_ID) == message.msg_id and last.seq:
        return last.seq
    raise SupersededError(f"{message.subject} has a batch stored after sequence {seq}")


async def stored_end(
    js: JetStreamContext, topology: Topology, namespace: str, job: str, run_uid: str, pod: str, container: str
) -> StoredEnd:
    """Where the stored log of one container ends (the start, when nothing is stored)."""
    subject = topology.log_subject(namespace, job, run_uid, pod, container)
    try:
        msg = await js.get_last_msg(topology.stream("logs"), subject)
    except NotFoundError:
        return StoredEnd(LogPosition(), 0)
    try:
        return StoredEnd(LogBatch.model_validate_json(msg.data or b"").position, msg.seq or 0)
    except ValidationError:
        return StoredEnd(LogPosition(), msg.seq or 0)


async def stored_position(
    js: JetStreamContext, topology: Topology, namespace: str, job: str, run_uid: str, pod: str, container: str
) -> LogPosition:
    """Where the stored log of one container ends (the start, when nothing is stored)."""
    return (await stored_end(js, topology, namespace, job, run_uid, pod, container)).position


@dataclass(frozen=True, slots=True)
class Raw:
    """A batch as the stream holds it, unparsed: its sequence, when it was stored, its bytes, how
    many of the read's messages the stream held after it when it was delivered, and its subject
    (its container's)."""

    seq: int
    at: datetime
    data: bytes
    pending: int
    subject: str = ""


async def read_raw(
    js: JetStreamContext,
    topology: Topology,
    subjects: str,
    *,
    start: datetime | None = None,
    start_seq: int | None = None,
    follow: bool = False,
    wait_s: float = 1.0,
) -> AsyncGenerator[list[Raw] | None, None]:
    """The batches of one run (of one of its pods: ``subjects``, :meth:`Topology.run_logs`) in the
    order they were stored, unparsed, a pull (up to 16) at a time: from those stored at ``start``
    on, or from stream sequence ``start_seq`` on (neither: all of them). Without ``follow`` the
    read ends with the last batch stored when it began; with it, it goes on, yielding ``None``
    after each ``wait_s`` without news (a stream's heartbeat). The caller parses (off its event
    loop if it wishes)."""
    if start_seq is not None:
        deliver, start = DeliverPolicy.BY_START_SEQUENCE, None
    else:
        deliver = DeliverPolicy.BY_START_TIME if start is not None else DeliverPolicy.ALL
    async with _ephemeral(
        js,
        topology,
        subjects,
        ConsumerConfig(deliver_policy=deliver, opt_start_time=start, opt_start_seq=start_seq),
    ) as (sub, info):
        if not follow and not info.num_pending:
            return
        while True:
            try:
                msgs = await sub.fetch(_FETCH, timeout=wait_s)
            except TimeoutError:  # nats-py's own, or asyncio's when a pull's answer is late
                if not follow:
                    return  # the rest aged out of the stream while we read
                yield None
                continue
            group = [
                Raw(
                    msg.metadata.sequence.stream,
                    msg.metadata.timestamp,
                    msg.data,
                    msg.metadata.num_pending,
                    msg.subject,
                )
                for msg in msgs
            ]
            if not follow and any(raw.pending == 0 for raw in group):
                yield group[: next(i for i, raw in enumerate(group) if raw.pending == 0) + 1]
                return
            yield group


@contextlib.asynccontextmanager
async def _ephemeral(
    js: JetStreamContext, topology: Topology, subject: str, config: ConsumerConfig
) -> AsyncIterator[tuple[JetStreamContext.PullSubscription, ConsumerInfo]]:
    """An unacknowledged, in-memory, single-replica consumer of ``subject`` on LOGS, with
    ``config``'s delivery, and its info, until the block ends: then it is removed (else the
    server removes it once idle). A bus that is missing or silent is
    :class:`LogsUnavailableError`."""
    config.ack_policy, config.mem_storage = AckPolicy.NONE, True
    config.num_replicas, config.inactive_threshold = 1, _IDLE_S
    try:
        sub = await js.pull_subscribe(subject, stream=topology.stream("logs"), config=config)
        info = await sub.consumer_info()
    except NotFoundError as exc:
        raise LogsUnavailableError(
            f"stream {topology.stream('logs')} does not exist (yet): the migrate Job declares it"
        ) from exc
    except (NatsError, TimeoutError) as exc:
        raise LogsUnavailableError(f"the bus did not answer: {exc!r}") from exc
    try:
        yield sub, info
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await js.delete_consumer(topology.stream("logs"), info.name)


async def subject_ends(js: JetStreamContext, topology: Topology, subjects: str) -> dict[str, int]:
    """The stream sequence of the last batch on each container subject of one run (of one of its
    pods: ``subjects``, :meth:`Topology.run_logs`): its messages' headers only, the last of each
    subject, through one ephemeral consumer."""
    ends: dict[str, int] = {}
    async with _ephemeral(
        js,
        topology,
        subjects,
        ConsumerConfig(deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, headers_only=True),
    ) as (sub, info):
        left = info.num_pending or 0
        while left:
            try:
                msgs = await sub.fetch(min(left, 256), timeout=1.0)
            except TimeoutError:  # the rest aged out of the stream while we read
                break
            for msg in msgs:
                ends[msg.subject] = msg.metadata.sequence.stream
                left = msg.metadata.num_pending
    return ends


def parsed(raw: Raw, wanted: Callable[[bytes], bool] | None = None) -> Stored | None:
    """``raw`` parsed, or None where it is not a batch or ``wanted`` says no to its bytes."""
    if wanted is not None and not wanted(raw.data):
        return None
    try:
        return Stored(raw.seq, raw.at, LogBatch.model_validate_json(raw.data))
    except ValidationError:
        return None


async def parsed_batches(
    groups: AsyncIterator[list[Raw] | None], wanted: Callable[[bytes], bool] | None = None
) -> AsyncIterator[Stored | None]:
    """The batches :func:`read_raw` reads, parsed (None: a heartbeat). Unreadable messages are
    skipped, and so are those ``wanted`` says no to from their raw bytes (a search passing over
    batches unparsed)."""
    async for group in groups:
        if group is None:
            yield None
            continue
        for raw in group:
            stored = parsed(raw, wanted)
            if stored is not None:
                yield stored
