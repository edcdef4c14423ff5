"""History consumer: every job, pod, Kubernetes event and finding into the PostgreSQL history.

Two durable batch consumers (the ingest path: one transaction per pulled batch, acks after
commit): ``jobs.>`` for observations and ``findings.>`` for what the rules concluded. Writes
are idempotent (:mod:`controller.store.history`), so a redelivery after a crash between commit and
ack writes nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.wiring import Role, Wiring
from controller.bus.consuming import Durable
from controller.contract.events import BusEvent, parse_event
from controller.contract.findings import Finding, parse_finding
from controller.contract.subjects import HISTORY_DURABLE, HISTORY_FINDINGS_DURABLE
from controller.store.history import apply_events, apply_findings

CONSUMER = HISTORY_DURABLE
FINDINGS_CONSUMER = HISTORY_FINDINGS_DURABLE


def durables(engine: AsyncEngine) -> tuple[Durable[BusEvent], Durable[Finding]]:
    """The history durables: every observation, every finding."""

    async def store_events(events: Sequence[BusEvent]) -> None:
        async with engine.begin() as conn:
            await apply_events(conn, events)

    async def store_findings(findings: Sequence[Finding]) -> None:
        async with engine.begin() as conn:
            await apply_findings(conn, findings)

    return (
        Durable("jobs", CONSUMER, parse_event, store_events),
        Durable("findings", FINDINGS_CONSUMER, parse_finding, store_findings),
    )


async def attach(wiring: Wiring) -> Role:
    """The history role: every observation and finding into PostgreSQL (scales out: idempotent writes)."""
    return Role(durables(wiring.engine))
