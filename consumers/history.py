"""History consumer: every job, pod and Kubernetes event into the PostgreSQL history store.

A batch pull subscriber (the ingest path: one transaction per pulled batch, acks after
commit) on ``jobs.>``; writes are idempotent (:mod:`controller.history`), so redelivery
after a crash between commit and ack writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from faststream import Context
from faststream.middlewares import AckPolicy
from faststream.nats import JStream, NatsRouter, PullSub
from faststream.nats.message import NatsBatchMessage
from nats.js.api import AckPolicy as JsAckPolicy
from nats.js.api import ConsumerConfig, DeliverPolicy
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.consuming import BatchSettler, DeadLetterer
from controller.events import BusEvent, parse_event
from controller.history import apply_events
from controller.metrics import PipelineMetrics
from controller.settings import ConsumerSettings
from controller.subjects import Topology

CONSUMER = "history"


def consumer_config(settings: ConsumerSettings) -> ConsumerConfig:
    """Explicit acks, bounded redelivery, from the start of the stream on first creation."""
    return ConsumerConfig(
        ack_policy=JsAckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        max_deliver=settings.max_deliver,
        ack_wait=settings.ack_wait_s,
        max_ack_pending=max(settings.batch_size * 4, 1000),
    )


def build_router(
    topology: Topology,
    settings: ConsumerSettings,
    engine: AsyncEngine,
    dead_letter: DeadLetterer,
    metrics: PipelineMetrics,
) -> NatsRouter:
    """The history subscriber, ready to be included in a broker."""

    async def apply(events: Sequence[BusEvent]) -> None:
        async with engine.begin() as conn:
            await apply_events(conn, events)

    settler = BatchSettler(
        CONSUMER, parse_event, apply, dead_letter, metrics, settings.max_deliver, settings.retry_delay_s
    )
    router = NatsRouter()

    @router.subscriber(
        topology.wildcard("jobs"),
        stream=JStream(topology.stream("jobs"), declare=False),
        durable=topology.durable(CONSUMER),
        config=consumer_config(settings),
        pull_sub=PullSub(batch_size=settings.batch_size, timeout=settings.batch_timeout_s, batch=True),
        ack_policy=AckPolicy.MANUAL,
    )
    async def on_jobs(msg: NatsBatchMessage = Context("message")) -> None:
        await settler.settle(msg.raw_message)

    return router
