"""The one place that wires consumers to a broker and runs them until told to stop.

``history`` scales horizontally (its writes are idempotent); ``rules`` keeps each run's
state in memory and must run as a single replica (its warm start rebuilds that state from
the stream after a restart); ``audit`` appends to the hash chain under an advisory lock and
runs the SIEM exporters and the retention purge beside its subscribers; ``notify`` matches
events to subscriptions into a PostgreSQL outbox (one replica); ``dispatch`` sends webhooks
and email from that outbox (scales horizontally: claims are leases, and the consumer wakes
dispatchers in any process through PostgreSQL ``NOTIFY``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection
from datetime import UTC, datetime

from faststream.nats import NatsBroker
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers import audit, exporting, history, notify, rules
from controller.bus import connect
from controller.consuming import DeadLetterer
from controller.metrics import PipelineMetrics
from controller.settings import Settings
from controller.subjects import Topology

log = logging.getLogger(__name__)

CONSUMERS = ("history", "rules", "audit", "notify", "dispatch")


async def run_consumers(
    nats_url: str,
    topology: Topology,
    settings: Settings,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
    started: asyncio.Event | None = None,
    only: Collection[str] = CONSUMERS,
) -> None:
    """Consume until ``stop`` is set; streams must exist (:func:`controller.bus.ensure_streams`)."""
    unknown = set(only) - set(CONSUMERS)
    if unknown:
        raise ValueError(f"unknown consumers {sorted(unknown)}; choose from {list(CONSUMERS)}")
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

    if "history" in only:
        broker.include_router(history.build_router(topology, settings.consumer, engine, dead_letter, metrics))
    if "rules" in only:
        router, service = rules.build_router(
            topology,
            settings.consumer,
            settings.rules,
            js,
            dead_letter(rules.CONSUMER),
            metrics,
            lambda: datetime.now(UTC),
        )
        broker.include_router(router)
        warm = await service.warm_start()
        log.info("rules warm start: %s", warm)
    if "audit" in only:
        broker.include_router(
            audit.build_router(
                topology, settings.consumer, engine, js, dead_letter, metrics, lambda: datetime.now(UTC)
            )
        )
    dispatcher: notify.Dispatcher | None = None
    if "dispatch" in only:
        dispatcher = notify.Dispatcher(
            engine, settings.notify, metrics, mailer=notify.smtp_mailer(settings.notify.smtp)
        )
    if "notify" in only:
        await notify.prepare(js, topology)
        broker.include_router(
            notify.build_router(
                topology,
                settings.consumer,
                settings.notify,
                engine,
                dead_letter,
                metrics,
                wake=dispatcher.wake if dispatcher else lambda: None,
            )
        )
    await broker.start()
    background: list[asyncio.Task[None]] = []
    if dispatcher is not None:
        background.append(asyncio.create_task(dispatcher.run(stop)))
    if "rules" in only:
        background.append(
            asyncio.create_task(rules.run_ticker(service, settings.consumer.rules_tick_s, stop))
        )
    if "audit" in only:
        background += [
            asyncio.create_task(exporting.run_exporters(engine, settings.audit, stop, metrics.registry)),
            asyncio.create_task(audit.run_retention(engine, settings.audit, stop, lambda: datetime.now(UTC))),
        ]
    log.info("consumers running: %s", ", ".join(only))
    if started:
        started.set()
    try:
        await stop.wait()
    finally:
        await asyncio.gather(*background, return_exceptions=True)
        await broker.stop()
        await nc.drain()
