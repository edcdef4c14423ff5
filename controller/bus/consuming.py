"""Durable batch consumers: declared by a role, pulled and settled here until the process stops.

A role says what it consumes with :class:`Durable` — the stream family, the durable's name,
how a payload decodes, what a batch is applied with, an optional narrower subject, and
whether its replicas take turns (``ordered``) — where it defines the handler. This module is
the one place that runs them: :func:`open_durables` declares each durable (so a process is
ready once it has returned) and :func:`run_durable` pulls batches with a
:class:`~controller.bus.pulling.Puller` and hands each to a
:class:`~controller.bus.settling.BatchSettler`, which acknowledges, retries or dead-letters
every message. :func:`consuming` does both for a test or a tool that runs a few durables
in-process.

A durable may be one owner's :class:`Share` of a stream whose subjects the server cannot split
for it (a partition of the jobs, by a hash of the subject): what the owner's filter refuses is
acknowledged unread, and the owner is told how far each batch reached. A *lane*
(:func:`~controller.bus.settling.lane_config`) runs ahead of a durable, never instead of it:
each message is delivered once and acknowledged whatever comes of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from controller.bus.publishing import PUBLISH_RETRY_S
from controller.bus.pulling import Puller
from controller.bus.settling import BatchSettler, DeadLetterer, consumer_config, lane_config
from controller.contract.settings import ConsumerSettings
from controller.contract.subjects import StreamFamily, Topology
from controller.metrics import PipelineMetrics

__all__ = ["Durable", "Opened", "Share", "consuming", "open_durables", "run_durable"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Share(Generic[T]):
    """What one owner reads of a durable that receives more (every partition's messages, which
    NATS 2.9 cannot filter by a hash of the subject).

    ``keeps(subject, stream sequence)``: whether the owner reads that message; the others are
    acknowledged unread. ``apply(items, upto)``: the kept messages of a batch, decoded, with the
    highest stream sequence the batch reached (kept or not). ``passed(upto)``: a batch of which
    nothing was kept reached ``upto``."""

    keeps: Callable[[str, int], bool]
    apply: Callable[[Sequence[T], int], Awaitable[None]]
    passed: Callable[[int], Awaitable[None]] | None = None


@dataclass(frozen=True)
class Durable(Generic[T]):
    """One durable pull consumer of a role, as the role declares it.

    ``subject`` narrows what the durable receives (default: the whole family); the server
    filters, so messages the role would ignore never reach it. ``ordered``: one message is out
    at a time, so replicas sharing the durable take turns in stream order
    (:func:`~controller.bus.settling.consumer_config`). ``new_only``: a durable created now starts
    with the messages that come after it, not with the stream's first.

    ``name``: the durable's full name, when it is not the topology's for ``consumer`` (one of a
    partitioned consumer's). ``share``: the owner reads only its :class:`Share`, applied by the
    share's ``apply`` instead of ``apply``. ``lane``: a lane ahead of another durable
    (:func:`~controller.bus.settling.lane_config`, ``subject`` required): from now on, each
    message delivered once and acknowledged whatever comes of it (what fails is logged and left
    to the durable behind)."""

    family: StreamFamily
    consumer: str
    decode: Callable[[bytes], T]
    apply: Callable[[Sequence[T]], Awaitable[None]] | None = None
    subject: str | None = None
    ordered: bool = False
    new_only: bool = False
    name: str | None = None
    share: Share[T] | None = None
    lane: bool = False

    def __post_init__(self) -> None:
        if (self.apply is None) == (self.share is None):
            raise ValueError(f"durable {self.consumer}: give either apply or a share")
        if self.lane and self.subject is None:
            raise ValueError(f"lane of {self.consumer}: give its subject")


@dataclass(frozen=True)
class Opened:
    """A declared durable, ready to be run: its puller and how a batch of it is settled."""

    puller: Puller
    settle: Callable[[Sequence[Msg]], Awaitable[None]]


async def open_durables(
    nc: NATS,
    topology: Topology,
    settings: ConsumerSettings,
    durables: Sequence[Durable[Any]],
    metrics: PipelineMetrics,
    publish_retry_s: float = PUBLISH_RETRY_S,
) -> list[Opened]:
    """Declare every durable that does not exist yet (each filtered to its subject, with the
    retry bounds of ``settings``) and bind a puller to it; on failure the ones bound are closed.
    Dead letters are published with the bound ``publish_retry_s``."""
    opened: list[Opened] = []
    js = nc.jetstream()
    try:
        for durable in durables:
            if durable.lane and durable.subject is not None:
                config = lane_config(settings, durable.subject)
            else:
                config = replace(
                    consumer_config(settings, ordered=durable.ordered),
                    filter_subject=durable.subject or topology.wildcard(durable.family),
                )
            if durable.new_only:
                config.deliver_policy = DeliverPolicy.NEW
            puller = await Puller.open(
                nc,
                topology.stream(durable.family),
                durable.name or topology.durable(durable.consumer),
                config,
                batch=1 if durable.ordered else settings.batch_size,
                wait_s=settings.pull_wait_s,
                heartbeat_s=settings.pull_heartbeat_s,
            )
            dead_letter = DeadLetterer(js, topology, durable.consumer, metrics, publish_retry_s)
            opened.append(Opened(puller, _settling(durable, dead_letter, metrics, settings)))
    except BaseException:
        for done in opened:
            await done.puller.close()
        raise
    return opened


async def run_durable(opened: Opened, stop: asyncio.Event) -> None:
    """Pull and settle batches until ``stop`` is set; the batch in hand is settled first. Raises
    :class:`~controller.bus.pulling.PullError` if the server refuses (the durable was deleted)."""
    watcher = asyncio.create_task(_interrupt_on(stop, opened.puller))
    try:
        while not stop.is_set():
            msgs = await opened.puller.pull()
            if msgs:
                await opened.settle(msgs)
    finally:
        watcher.cancel()
        await opened.puller.close()


def _settling(
    durable: Durable[T], dead_letter: DeadLetterer, metrics: PipelineMetrics, settings: ConsumerSettings
) -> Callable[[Sequence[Msg]], Awaitable[None]]:
    """How a batch of ``durable`` is settled: by a :class:`BatchSettler`, as a share, or as a lane."""
    share = durable.share

    def settler(apply: Callable[[Sequence[T]], Awaitable[None]]) -> BatchSettler[T]:
        return BatchSettler(
            durable.consumer,
            durable.decode,
            apply,
            dead_letter,
            metrics,
            settings.max_deliver,
            settings.retry_delay_s,
        )

    if share is None:
        assert durable.apply is not None
        return settler(durable.apply).settle
    if durable.lane:
        return functools.partial(_settle_lane, durable.consumer, durable.decode, share)

    async def settle(msgs: Sequence[Msg]) -> None:
        kept, others, top = _sorted_out(share, msgs)
        for msg in others:
            await msg.ack()  # another owner's, or one this owner has no need of
        if not kept:
            if share.passed is not None:
                await share.passed(top)
            return

        async def apply(items: Sequence[T]) -> None:
            await share.apply(items, top)

        await settler(apply).settle(kept)

    return settle


def _sorted_out(share: Share[T], msgs: Sequence[Msg]) -> tuple[list[Msg], list[Msg], int]:
    """The messages of a batch ``share`` keeps, those it does not (in batch order), and the
    batch's highest stream sequence (0 for none)."""
    kept: list[Msg] = []
    others: list[Msg] = []
    for msg in msgs:
        (kept if share.keeps(msg.subject, msg.metadata.sequence.stream) else others).append(msg)
    return kept, others, max((msg.metadata.sequence.stream for msg in msgs), default=0)


async def _settle_lane(
    consumer: str, decode: Callable[[bytes], T], share: Share[T], msgs: Sequence[Msg]
) -> None:
    """A lane's batch: what the share keeps and decodes is applied; every message is acknowledged,
    whatever comes of it (the durable behind the lane reads it in turn, and dead-letters it)."""
    items: list[T] = []
    kept, _, top = _sorted_out(share, msgs)
    for msg in kept:
        with contextlib.suppress(ValueError):  # pydantic.ValidationError is a ValueError
            items.append(decode(msg.data))
    if items:
        try:
            await share.apply(items, top)
        except Exception as exc:  # left to the durable behind the lane
            log.warning("%s: lane: %r", consumer, exc)
    for msg in msgs:
        with contextlib.suppress(Exception):
            await msg.ack()


async def _interrupt_on(stop: asyncio.Event, puller: Puller) -> None:
    await stop.wait()
    puller.interrupt()


@contextlib.asynccontextmanager
async def consuming(
    nc: NATS,
    topology: Topology,
    settings: ConsumerSettings,
    durables: Sequence[Durable[Any]],
    metrics: PipelineMetrics,
) -> AsyncIterator[None]:
    """Run ``durables`` in this process while the block runs (declared before it starts)."""
    stop = asyncio.Event()
    opened = await open_durables(nc, topology, settings, durables, metrics)
    tasks = [asyncio.create_task(run_durable(one, stop), name=one.puller.durable) for one in opened]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)
