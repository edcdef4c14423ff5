"""The one place that wires consumers to a broker and runs them until told to stop."""

from __future__ import annotations

import asyncio
import logging

from faststream.nats import NatsBroker
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers import history
from controller.bus import connect
from controller.consuming import DeadLetterer
from controller.metrics import PipelineMetrics
from controller.settings import ConsumerSettings
from controller.subjects import Topology

log = logging.getLogger(__name__)


async def run_consumers(
    nats_url: str,
    topology: Topology,
    settings: ConsumerSettings,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
    started: asyncio.Event | None = None,
) -> None:
    """Consume until ``stop`` is set; streams must exist (:func:`controller.bus.ensure_streams`)."""
    nc = await connect(nats_url, "mpijc-consumers")
    js = nc.jetstream()
    broker = NatsBroker(
        nats_url,
        logger=logging.getLogger("consumers.broker"),
        log_level=logging.DEBUG,
        max_reconnect_attempts=-1,
    )

    def dead_letter(consumer: str) -> DeadLetterer:
        return DeadLetterer(js, topology, consumer, metrics)

    broker.include_router(history.build_router(topology, settings, engine, dead_letter, metrics))
    await broker.start()
    log.info("consumers running: %s", history.CONSUMER)
    if started:
        started.set()
    try:
        await stop.wait()
    finally:
        await broker.stop()
        await nc.drain()
