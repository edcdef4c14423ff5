"""The ``LOGS`` stream as a store of followed log lines: write batches, find where a container's
log stands, read a run's batches back (once, or following new ones).

One subject per container of a run (:meth:`Topology.log_subject`); its last message carries the
position following resumes from (:class:`~controller.contract.logs.LogPosition`), so a
restarted or replaced follower needs nothing but the bus. Reads are ephemeral ordered pull
consumers filtered on one run's subjects, without acks, gone when the read ends (or after
``_IDLE_S`` if the reader dies).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError
from pydantic import ValidationError

from controller.bus.publishing import Outgoing, publish_stored
from controller.contract.logs import LogBatch, LogPosition, PackedBatch
from controller.contract.subjects import Topology

__all__ = ["LogsUnavailableError", "Stored", "publish_batches", "read_run", "stored_position"]

_FETCH = 16
"""Batches asked for per pull: at most 16 x 256 KiB of text (``batch_max_bytes``), well under
what a subscription holds before the server counts it a slow consumer."""
_IDLE_S = 30.0


class LogsUnavailableError(Exception):
    """The ``LOGS`` stream cannot be read now (not declared, or the bus not answering)."""


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


def outgoing(topology: Topology, batch: LogBatch | PackedBatch) -> Outgoing:
    """A batch as it goes onto ``LOGS``."""
    if isinstance(batch, PackedBatch):
        return Outgoing(subject_of(topology, batch.head), batch.payload(), batch.head.msg_id)
    return Outgoing(
        subject_of(topology, batch), batch.model_dump_json(exclude_defaults=True).encode(), batch.msg_id
    )


async def stored_position(
    js: JetStreamContext, topology: Topology, namespace: str, job: str, run_uid: str, pod: str, container: str
) -> LogPosition:
    """Where the stored log of one container ends (the start, when nothing is stored)."""
    subject = topology.log_subject(namespace, job, run_uid, pod, container)
    try:
        msg = await js.get_last_msg(topology.stream("logs"), subject)
    except NotFoundError:
        return LogPosition()
    try:
        return LogBatch.model_validate_json(msg.data or b"").position
    except ValidationError:
        return LogPosition()


async def read_run(
    js: JetStreamContext,
    topology: Topology,
    namespace: str,
    job: str,
    run_uid: str,
    *,
    pod: str | None = None,
    start: datetime | None = None,
    follow: bool = False,
    wait_s: float = 1.0,
    wanted: Callable[[bytes], bool] | None = None,
) -> AsyncIterator[Stored | None]:
    """The batches of one run (of one of its pods) in the order they were stored, from those
    stored at ``start`` on (all of them: None). Without ``follow`` the read ends with the last
    batch stored when it began; with it, it goes on, yielding ``None`` after each ``wait_s``
    without news (a stream's heartbeat). Unreadable messages are skipped, and so are those
    ``wanted`` says no to from their raw bytes (a search passing over batches unparsed)."""
    try:
        sub = await js.pull_subscribe(
            topology.run_logs(namespace, job, run_uid, pod),
            stream=topology.stream("logs"),
            config=ConsumerConfig(
                ack_policy=AckPolicy.NONE,
                deliver_policy=DeliverPolicy.BY_START_TIME if start is not None else DeliverPolicy.ALL,
                opt_start_time=start,
                mem_storage=True,
                num_replicas=1,
                inactive_threshold=_IDLE_S,
            ),
        )
        info = await sub.consumer_info()
    except NotFoundError as exc:
        raise LogsUnavailableError(
            f"stream {topology.stream('logs')} does not exist (yet): the migrate Job declares it"
        ) from exc
    except (NatsError, TimeoutError) as exc:
        raise LogsUnavailableError(f"the bus did not answer: {exc!r}") from exc
    try:
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
            for msg in msgs:
                if wanted is None or wanted(msg.data):
                    try:
                        batch = LogBatch.model_validate_json(msg.data)
                    except ValidationError:
                        batch = None
                    if batch is not None:
                        yield Stored(msg.metadata.sequence.stream, msg.metadata.timestamp, batch)
                if not follow and msg.metadata.num_pending == 0:
                    return
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
        with contextlib.suppress(Exception):
            await js.delete_consumer(topology.stream("logs"), info.name)
