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
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from nats.aio.client import Client as NATS
from nats.js.api import DeliverPolicy

from controller.bus.publishing import PUBLISH_RETRY_S
from controller.bus.pulling import Puller
from controller.bus.settling import BatchSettler, DeadLetterer, consumer_config
from controller.contract.settings import ConsumerSettings
from controller.contract.subjects import StreamFamily, Topology
from controller.metrics import PipelineMetrics

__all__ = ["Durable", "Opened", "consuming", "open_durables", "run_durable"]

T = TypeVar("T")


@dataclass(frozen=True)
class Durable(Generic[T]):
    """One durable pull consumer of a role, as the role declares it.

    ``subject`` narrows what the durable receives (default: the whole family); the server
    filters, so messages the role would ignore never reach it. ``ordered``: one message is out
    at a time, so replicas sharing the durable take turns in stream order
    (:func:`~controller.bus.settling.consumer_config`). ``new_only``: a durable created now starts
    with the messages that come after it, not with the stream's first."""

    family: StreamFamily
    consumer: str
    decode: Callable[[bytes], T]
    apply: Callable[[Sequence[T]], Awaitable[None]]
    subject: str | None = None
    ordered: bool = False
    new_only: bool = False


@dataclass(frozen=True)
class Opened:
    """A declared durable, ready to be run: its puller and its settler."""

    puller: Puller
    settler: BatchSettler[Any]


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
            config = replace(
                consumer_config(settings, ordered=durable.ordered),
                filter_subject=durable.subject or topology.wildcard(durable.family),
            )
            if durable.new_only:
                config.deliver_policy = DeliverPolicy.NEW
            puller = await Puller.open(
                nc,
                topology.stream(durable.family),
                topology.durable(durable.consumer),
                config,
                batch=1 if durable.ordered else settings.batch_size,
                wait_s=settings.pull_wait_s,
                heartbeat_s=settings.pull_heartbeat_s,
            )
            settler = BatchSettler(
                durable.consumer,
                durable.decode,
                durable.apply,
                DeadLetterer(js, topology, durable.consumer, metrics, publish_retry_s),
                metrics,
                settings.max_deliver,
                settings.retry_delay_s,
            )
            opened.append(Opened(puller, settler))
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
                await opened.settler.settle(msgs)
    finally:
        watcher.cancel()
        await opened.puller.close()


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
