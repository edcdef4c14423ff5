"""History consumer: every job, pod, Kubernetes event and finding into the PostgreSQL history.

Two batch pull subscribers (the ingest path: one transaction per pulled batch, acks after
commit): ``jobs.>`` for observations and ``findings.>`` for what the rules concluded. Writes
are idempotent (:mod:`controller.store.history`), so a redelivery after a crash between commit and
ack writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from faststream.nats import NatsRouter
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.wiring import Role, Wiring
from controller.bus.settling import DeadLetterer, subscribe_batches
from controller.contract.events import BusEvent, parse_event
from controller.contract.findings import Finding, parse_finding
from controller.contract.settings import ConsumerSettings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store.history import apply_events, apply_findings

CONSUMER = "history"
FINDINGS_CONSUMER = "history-findings"


def build_router(
    topology: Topology,
    settings: ConsumerSettings,
    engine: AsyncEngine,
    dead_letter: Callable[[str], DeadLetterer],
    metrics: PipelineMetrics,
) -> NatsRouter:
    """The history subscribers, ready to be included in a broker."""

    async def store_events(events: Sequence[BusEvent]) -> None:
        async with engine.begin() as conn:
            await apply_events(conn, events)

    async def store_findings(findings: Sequence[Finding]) -> None:
        async with engine.begin() as conn:
            await apply_findings(conn, findings)

    router = NatsRouter()
    subscribe_batches(
        router,
        topology,
        "jobs",
        CONSUMER,
        settings,
        parse_event,
        store_events,
        dead_letter(CONSUMER),
        metrics,
    )
    subscribe_batches(
        router,
        topology,
        "findings",
        FINDINGS_CONSUMER,
        settings,
        parse_finding,
        store_findings,
        dead_letter(FINDINGS_CONSUMER),
        metrics,
    )
    return router


async def attach(wiring: Wiring) -> Role:
    """The history role: every observation and finding into PostgreSQL (scales out: idempotent writes)."""
    return Role(
        build_router(
            wiring.topology, wiring.settings.consumer, wiring.engine, wiring.dead_letter, wiring.metrics
        )
    )
