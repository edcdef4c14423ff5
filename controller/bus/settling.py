"""Settling a pulled batch: ack what worked, retry what may work later, dead-letter the rest.

Every consumer hands its batch of raw JetStream messages to a :class:`BatchSettler`, made with
a decoder and an apply function; the mapping from failure kind to ack action lives here only:

- a payload that does not decode is **poison**: published to ``dlq.<consumer>`` with the
  error, then acknowledged (it would fail the same way forever);
- a **transient** failure (connection lost, database restarting, timeout) negatively
  acknowledges the batch with a delay, until ``max_deliver`` deliveries, after which each
  message goes to the dead-letter subject instead of being redelivered once more;
- any other failure of a whole batch is isolated: each message is applied alone, so one
  bad message cannot hold back the good ones in its batch.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, TypeVar

from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy

from controller.bus.handing import hand_over, sendable, takes_at_once
from controller.bus.publishing import PUBLISH_RETRY_S, Outgoing, publish_stored
from controller.contract.errors import RetryableError
from controller.contract.events import DeadLetter
from controller.contract.settings import ConsumerSettings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    """Whether a failure is worth a redelivery rather than a dead letter.

    The store's engine raises its transient errors as :class:`RetryableError` already."""
    return isinstance(exc, RetryableError | OSError | TimeoutError)


@dataclass
class DeadLetterer:
    """Publishes dead letters for one consumer."""

    js: JetStreamContext
    topology: Topology
    consumer: str
    metrics: PipelineMetrics
    retry_s: float = PUBLISH_RETRY_S

    async def __call__(self, msg: Msg, error: str, reason: str) -> None:
        meta = msg.metadata
        letter = DeadLetter(
            consumer=self.consumer,
            subject=msg.subject,
            payload=msg.data.decode(errors="replace"),
            error=error,
            deliveries=meta.num_delivered or 1,
            stream_sequence=meta.sequence.stream if meta.sequence else None,
            failed_at=datetime.now(UTC),
        )
        sequence = letter.stream_sequence
        await publish_stored(  # retried under one id: a retry stores the letter once
            self.js,
            [
                Outgoing(
                    self.topology.dead_letter(self.consumer),
                    letter.model_dump_json().encode(),
                    f"dlq:{self.consumer}:{sequence}:{letter.deliveries}" if sequence else None,
                )
            ],
            self.retry_s,
        )
        self.metrics.dead_letters.labels(self.consumer, reason).inc()
        log.warning(
            "dead-lettered %s (seq %s) from %s: %s", msg.subject, letter.stream_sequence, self.consumer, error
        )


@dataclass
class BatchSettler(Generic[T]):
    """The ack policy of one consumer."""

    consumer: str
    decode: Callable[[bytes], T]
    apply: Callable[[Sequence[T]], Awaitable[None]]
    dead_letter: DeadLetterer
    metrics: PipelineMetrics
    max_deliver: int
    retry_delay_s: float

    async def settle(self, msgs: Sequence[Msg]) -> None:
        """Process one pulled batch and settle every message in it."""
        with self.metrics.batch_seconds.labels(self.consumer).time():
            good: list[tuple[Msg, T]] = []
            for msg in msgs:
                try:
                    good.append((msg, self.decode(msg.data)))
                except ValueError as exc:  # pydantic.ValidationError is a ValueError
                    await self._give_up(msg, f"undecodable payload: {exc}", "poison")
            if good:
                await self._apply(good)

    async def _apply(self, items: list[tuple[Msg, T]]) -> None:
        try:
            await self.apply([item for _, item in items])
        except Exception as exc:
            if is_transient(exc):
                await self._retry([msg for msg, _ in items], exc)
            elif len(items) > 1:
                log.info("%s: batch of %d failed (%s); applying one by one", self.consumer, len(items), exc)
                for item in items:
                    await self._apply([item])
            else:
                await self._give_up(items[0][0], f"{type(exc).__name__}: {exc}", "failed")
            return
        await ack_all([msg for msg, _ in items])
        self.metrics.consumed.labels(self.consumer).inc(len(items))

    async def _retry(self, msgs: list[Msg], exc: BaseException) -> None:
        log.warning("%s: transient failure, %d messages to be redelivered: %s", self.consumer, len(msgs), exc)
        for msg in msgs:
            if (msg.metadata.num_delivered or 1) >= self.max_deliver:
                await self._give_up(
                    msg, f"still failing after {self.max_deliver} deliveries: {exc}", "exhausted"
                )
            else:
                await msg.nak(delay=self.retry_delay_s)
                self.metrics.redeliveries.labels(self.consumer).inc()

    async def _give_up(self, msg: Msg, error: str, reason: str) -> None:
        await self.dead_letter(msg, error, reason)
        await msg.ack()


def consumer_config(settings: ConsumerSettings, *, ordered: bool = False) -> ConsumerConfig:
    """Explicit acks, bounded redelivery, from the start of the stream on first creation.

    ``ordered``: one message is out at a time (``max_ack_pending`` 1), so replicas sharing
    the durable take turns and process the stream strictly in its order — the next message
    is handed out only once the previous one is acknowledged, i.e. committed. A replica
    killed holding one stalls the others for ``ack_wait_s``, then that message is redelivered
    first. For low-rate consumers that compare each message with the state the previous one
    left (notify's findings); the others get many messages ahead, in batches, for throughput."""
    return ConsumerConfig(
        ack_policy=JsAckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        max_deliver=settings.max_deliver,
        ack_wait=settings.ack_wait_s,
        max_ack_pending=max_ack_pending(settings, ordered=ordered),
    )


def max_ack_pending(settings: ConsumerSettings, *, ordered: bool) -> int:
    """Messages a durable hands out before any is acknowledged (see :func:`consumer_config`)."""
    return 1 if ordered else max(settings.batch_size * 4, 1000)


def lane_config(settings: ConsumerSettings, subject: str) -> ConsumerConfig:
    """A lane ahead of a durable, never instead of it: ``subject`` from now on, each message
    delivered once (whatever fails there is left to the durable, which reads it in turn)."""
    return ConsumerConfig(
        ack_policy=JsAckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.NEW,
        ack_wait=settings.ack_wait_s,
        max_deliver=1,
        filter_subject=subject,
    )


async def ack_all(msgs: Sequence[Msg]) -> None:
    """Acknowledge each of ``msgs``, one ``+ACK`` each as :meth:`Msg.ack` sends it (never an
    ``AckAll``: replicas sharing a durable hold each other's messages), handed to the client in
    one write instead of one publish per message (its checks, its command and its flush request:
    about 1.5 µs a message, a batch's 500 of them per commit; :mod:`controller.bus.handing`).
    Where one is not a JetStream message or is acknowledged already, the client would not take
    them at once (closed, draining, reconnecting: it buffers or refuses each) or a reply subject
    is not one it would send, each goes through :meth:`Msg.ack` as before, which acknowledges or
    raises as it did."""
    if not msgs:
        return
    nc = msgs[0]._client
    replies = [msg.reply for msg in msgs]
    if (
        not sendable(replies)  # not JetStream's, or not sent as it is
        or any(msg._ackd for msg in msgs)
        or not takes_at_once(nc)
        or any(msg._client is not nc for msg in msgs)
    ):
        for msg in msgs:
            await msg.ack()
        return
    # nats-py's own PUB command for an empty payload and no reply subject (protocol.command.pub_cmd)
    await hand_over(nc, "".join([f"PUB {reply}  0\r\n\r\n" for reply in replies]).encode(), len(msgs), 0)
    for msg in msgs:
        msg._ackd = True
