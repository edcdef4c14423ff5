"""JetStream plumbing shared by producers and consumers: streams and deduplicated publishing.

Streams are declared idempotently (created, or updated to the configured limits) before
anything is published or consumed. Publishing is pipelined (``publish_async``) and every
message carries ``Nats-Msg-Id`` from :func:`controller.events.message_id`, so a message
published twice within the duplicate window is stored once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import nats
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import DiscardPolicy, StorageType, StreamConfig
from nats.js.errors import NotFoundError

from controller.events import BusEvent, message_id
from controller.settings import NatsSettings
from controller.subjects import StreamFamily, Topology

log = logging.getLogger(__name__)

FAMILIES: tuple[StreamFamily, ...] = ("jobs", "findings", "audit", "dlq")
MSG_ID = "Nats-Msg-Id"


def stream_config(topology: Topology, family: StreamFamily, settings: NatsSettings) -> StreamConfig:
    """The configuration each stream is kept at."""
    return StreamConfig(
        name=topology.stream(family),
        subjects=[topology.wildcard(family)],
        storage=StorageType.FILE,
        duplicate_window=settings.duplicate_window_s,
        max_age=settings.max_age_s,
        discard=DiscardPolicy.OLD,
    )


async def ensure_streams(js: JetStreamContext, topology: Topology, settings: NatsSettings) -> None:
    """Create every stream, or bring an existing one to the configured limits."""
    for family in FAMILIES:
        config = stream_config(topology, family, settings)
        try:
            await js.stream_info(config.name or "")
        except NotFoundError:
            await js.add_stream(config)
            log.info("created stream %s for %s", config.name, config.subjects)
        else:
            await js.update_stream(config)


async def narrow_durable(js: JetStreamContext, stream: str, durable: str, subject: str) -> bool:
    """Give an existing durable consumer the filter ``subject``; returns whether it changed.

    Subscribing binds to a durable as it was declared, so a filter narrowed in a later
    version would never reach a running installation; the server keeps the consumer's
    position across the update. A durable that does not exist yet is left to be created."""
    try:
        info = await js.consumer_info(stream, durable)
    except NotFoundError:
        return False
    if info.config.filter_subject == subject and not info.config.filter_subjects:
        return False
    await js.add_consumer(stream, replace(info.config, filter_subject=subject, filter_subjects=None))
    log.info("durable %s on %s now filters %s", durable, stream, subject)
    return True


async def connect(url: str, name: str) -> NATS:
    """Connect with unbounded reconnects: a restarting NATS must not kill a watcher."""
    return await nats.connect(url, name=name, max_reconnect_attempts=-1, reconnect_time_wait=1)


@dataclass
class Publisher:
    """Publishes bus events with deduplication ids, pipelined, waiting for every ack."""

    js: JetStreamContext
    topology: Topology

    async def publish(self, events: Sequence[BusEvent]) -> int:
        """Publish ``events`` in order; returns how many were new (not duplicates)."""
        futures = [
            await self.js.publish_async(
                self.topology.job_event(event),
                event.model_dump_json(exclude_defaults=False).encode(),
                headers={MSG_ID: message_id(event)},
            )
            for event in events
        ]
        acks = await asyncio.gather(*futures)
        return sum(1 for ack in acks if not ack.duplicate)


async def wait_until_consumed(
    js: JetStreamContext, stream: str, durable: str, timeout_s: float = 60.0
) -> None:
    """Block until a durable consumer has acknowledged everything in its stream."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        info = await js.consumer_info(stream, durable)
        if not info.num_pending and not info.num_ack_pending:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(
                f"{durable} still has {info.num_pending} pending, {info.num_ack_pending} unacked"
            )
        await asyncio.sleep(0.05)
