"""Audit consumer: lifecycle records from the watch stream, and every audit record into the chain.

Two durable batch consumers:

- ``audit-lifecycle`` on ``jobs.>``: a job observed entering Succeeded or Failed, or deleted,
  becomes an :class:`~controller.contract.audit.AuditRecord` published on ``audit.<ns>``
  (:func:`controller.contract.audit.lifecycle_record`). Its id is ``<job uid>/<verb>``, so JetStream
  drops repeats within its duplicate window and the table's unique key drops later ones:
  one ``failed`` record per run however often the Failed job is observed.
- ``audit`` on ``audit.>``: admission and lifecycle records appended to the hash-chained
  table (:func:`controller.store.auditchain.append`), one transaction per batch, acked after commit;
  a redelivered record is recognised by its id and appended once.

Appends take the chain's advisory lock, so replicas are safe (they take turns).
:func:`run_retention` runs the audited purge periodically when ``audit.retention_days`` is set.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.client import JetStreamContext
from controller.bus.consuming import Durable
from controller.bus.publishing import PUBLISH_RETRY_S, Publisher
from controller.contract.audit import (
    Actor,
    AuditRecord,
    lifecycle_record,
    parse_audit_record,
)
from controller.contract.clock import Clock, pause
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent, JobObserved, parse_event
from controller.contract.settings import AuditSettings
from controller.contract.subjects import AUDIT_DURABLE, AUDIT_LIFECYCLE_DURABLE, Topology
from controller.metrics import MetricGroup
from controller.store import corroboration
from controller.store.auditchain import PurgeResult, append, purge
from controller.store.engine import UNAVAILABLE

log = logging.getLogger(__name__)

CONSUMER = AUDIT_DURABLE
LIFECYCLE_CONSUMER = AUDIT_LIFECYCLE_DURABLE
RETENTION_ACTOR = Actor(username="system:mpijob-controller:retention")
"""Who the scheduled purge is recorded as."""

T = TypeVar("T")


def durables(
    topology: Topology,
    engine: AsyncEngine,
    js: JetStreamContext,
    clock: Clock,
    publish_retry_s: float = PUBLISH_RETRY_S,
) -> tuple[Durable[BusEvent], Durable[AuditRecord]]:
    """The audit durables: lifecycle records from the watch stream, every record into the chain."""

    async def publish_lifecycle(events: Sequence[BusEvent]) -> None:
        jobs = [event for event in events if isinstance(event, JobObserved)]
        if jobs:  # what admission records are corroborated against
            async with engine.begin() as conn:
                await corroboration.record_changes(conn, jobs)
        records = [record for job in jobs if (record := lifecycle_record(job)) is not None]
        if not records:
            return
        try:
            await Publisher(js, topology, publish_retry_s).publish_records(records)
        except Exception as exc:  # not stored on the bus: redeliver the batch, ids keep it idempotent
            raise RetryableError(f"could not publish {len(records)} lifecycle audit records: {exc}") from exc

    async def store(records: Sequence[AuditRecord]) -> None:
        async with engine.begin() as conn:
            await append(conn, records, clock())

    return (
        Durable("jobs", LIFECYCLE_CONSUMER, parse_event, publish_lifecycle),
        Durable("audit", CONSUMER, parse_audit_record, store),
    )


async def purge_once(
    engine: AsyncEngine,
    retention_days: int,
    actor: Actor,
    now: datetime,
    *,
    respect_cursors: bool = True,
) -> PurgeResult:
    """One audited purge in its own transaction; logs what it removed and what it had to keep."""
    async with engine.begin() as conn:
        result = await purge(conn, retention_days, actor, now, respect_cursors=respect_cursors)
    if result.record is not None:
        log.info("audit retention: %s", result.record.record.message)
    if result.held_back_by:
        log.warning(
            "audit retention: kept records not yet exported by %s",
            ", ".join(f"{sink} (at seq {seq})" for sink, seq in sorted(result.held_back_by.items())),
        )
    return result


class CorroborationMetrics(MetricGroup):
    """Verdicts on admission records (:mod:`controller.store.corroboration`)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.decided = Counter(
            "mpijc_admission_corroborations",
            "Admission records judged against the watch stream, by verdict (verified, contradicted, "
            "unmatched, unobservable, disputed; a verdict revised by a later rival counts again under its "
            "new one) and how the webhook's caller was authenticated (mtls, "
            "unverified, none: the record did not say).",
            ["status", "caller"],
            registry=self.registry,
        )
        self.pending = Gauge(
            "mpijc_admission_uncorroborated",
            "Admission records not judged yet (younger than the corroboration window).",
            registry=self.registry,
        )


SHOWN_SUSPECTS = 10
"""Suspect verdicts logged one by one per round; the rest are counted in one line."""


def suspect(decision: corroboration.Decision) -> bool:
    """A verdict that may mean a forged record: not borne out, from a caller without the API
    server's certificate, an authenticated record whose change another record had taken, or a
    change two records without the certificate both claim (``disputed``)."""
    if decision.status == "disputed":
        return True
    return decision.status in {"contradicted", "unmatched"} and (
        decision.caller != "mtls" or decision.rival is not None
    )


def _report(decisions: Sequence[corroboration.Decision]) -> None:
    suspects = [d for d in decisions if suspect(d)]
    for d in suspects[:SHOWN_SUSPECTS]:
        log.warning(
            "audit: admission record seq %d (caller %s) is %s, possibly forged: %s",
            d.seq,
            d.caller or "not stated",
            d.status,
            d.detail,
        )
    if len(suspects) > SHOWN_SUSPECTS:
        log.warning(
            "audit: %d more admission records contradicted, unmatched or disputed (GET /api/v1/audit)",
            len(suspects) - SHOWN_SUSPECTS,
        )
    for d in decisions:
        if d.status in {"contradicted", "unmatched"} and not suspect(d):
            log.info("audit: authenticated admission record seq %d is %s: %s", d.seq, d.status, d.detail)


async def run_corroboration(
    engine: AsyncEngine,
    settings: AuditSettings,
    stop: asyncio.Event,
    clock: Clock,
    metrics: CorroborationMetrics,
) -> None:
    """Judge pending admission records every ``corroboration_interval_s`` until ``stop`` is set
    (:mod:`controller.store.corroboration`); a :func:`suspect` verdict is logged as a warning."""
    window = timedelta(seconds=settings.corroboration_window_s)
    settled = 0  # every admission record up to this seq has a verdict: not looked at again
    while not stop.is_set():
        try:
            async with engine.begin() as conn:
                decided = await corroboration.decide(conn, clock(), window, after=settled)
                metrics.pending.set(await corroboration.pending(conn, settled))
                settled = await corroboration.settled(conn, settled)
            for d in decided:
                metrics.decided.labels(d.status, d.caller or "none").inc()
            _report(decided)
        except UNAVAILABLE as exc:
            log.warning("audit: corroboration failed, trying again: %s", exc)
        await pause(stop, settings.corroboration_interval_s)


async def run_retention(
    engine: AsyncEngine, settings: AuditSettings, stop: asyncio.Event, clock: Clock
) -> None:
    """Purge records older than ``retention_days`` every ``purge_interval_s`` until ``stop`` is set."""
    if settings.retention_days is None:
        return
    while not stop.is_set():
        try:
            await purge_once(engine, settings.retention_days, RETENTION_ACTOR, clock())
        except Exception:
            log.exception("audit retention purge failed; trying again in %.0fs", settings.purge_interval_s)
        await pause(stop, settings.purge_interval_s)
