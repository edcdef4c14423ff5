"""The notify consumer: job phase transitions and finding changes in, outbox rows out.

Two durable batch consumers (``notify`` on ``jobs.*.*.job``, ``notify-findings`` on
``findings.>``; acks, redelivery and dead letters by :class:`controller.bus.settling.BatchSettler`).
Each batch is one transaction that

1. compares every job observation with the last state stored for its uid (``notify_jobs``)
   and every finding with its last status (``notify_findings``), so a relist, a replay or
   a late, older message announces nothing: only *transitions* become events —
   ``job.created`` (first sight), ``job.running``/``job.succeeded``/``job.failed`` (phase
   changes), ``job.deleted``, ``finding.firing`` (confirmed: new, from pending, or again after
   resolving) and ``finding.resolved`` (of one announced firing). A ``pending`` finding — what a
   running job printed, not a verdict — is ``finding.observed``, which only subscriptions naming
   that type receive; one the run recovers from resolves without an event, so a run that
   recovers wakes no one;
2. matches the events against the active subscriptions (:class:`controller.contract.notifications.Filters`),
   expiring a one-shot subscription as it fires — the subscriptions and their parsed filters
   are cached between batches and reloaded when their fingerprint (ids, ``updated_at``)
   changes, so a batch of one event does not read and parse a thousand subscriptions;
3. writes one outbox row per (subscription, event), its id derived from both;
4. when Alertmanagers are configured, records each confirmed finding's alert (firing, changed,
   resolved; never a pending one) for the Alertmanager sink (:mod:`controller.store.alerts`,
   :mod:`.alertmanager`);

and commits before the messages are acknowledged. The dispatcher sends from the outbox.

Replicas share both durables. Batches are serialized by a transaction-scoped advisory lock
and outbox ids derive from (subscription, event), so a redelivered batch enqueues nothing
twice. Two replicas may still take one job's observations in either order; a job's
announcements do not depend on it: the newest observation announces every transition it
implies that was not announced yet (a job seen Succeeded with a start time has been running),
and older ones announce nothing. A finding's episodes (firing, resolved, firing again…) are
not implied by its newest revision, so the findings durable is *ordered*
(:func:`controller.bus.settling.consumer_config`): JetStream hands out one finding at a
time, and whichever replica takes it sees the state the previous one left.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from consumers.notify.alerting import alert_row
from consumers.notify.metrics import NotifyMetrics
from consumers.wiring import Role, Wiring
from controller.bus.client import JetStreamContext
from controller.bus.consuming import Durable
from controller.bus.settling import max_ack_pending
from controller.bus.streams import align_durable
from controller.contract.clock import Clock, utcnow
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent, JobObserved, JobRef, parse_event
from controller.contract.findings import Finding, parse_finding
from controller.contract.kubeflow import resource_version_order
from controller.contract.notifications import (
    EventData,
    EventType,
    FilterError,
    Filters,
    FindingInfo,
    JobInfo,
    WebhookEvent,
    links,
)
from controller.contract.settings import ConsumerSettings, NotifySettings
from controller.contract.subjects import NOTIFY_DURABLE, NOTIFY_FINDINGS_DURABLE, Topology
from controller.metrics import PipelineMetrics
from controller.store import alerts, notifystate, outbox, subscriptions
from controller.store.engine import lock_transaction
from controller.store.models import NotifyFinding, NotifyJob
from controller.store.subscriptions import SubscriptionRecord

log = logging.getLogger(__name__)

CONSUMER = NOTIFY_DURABLE
FINDINGS_CONSUMER = NOTIFY_FINDINGS_DURABLE
Row = outbox.Row

_LOCK_KEY = 0x6D706A63_0003  # one advisory lock for all notify batches ("mpjc", migration 0003)
_PHASE_EVENTS: dict[str, EventType] = {
    "Running": "job.running",
    "Succeeded": "job.succeeded",
    "Failed": "job.failed",
}


@dataclass(frozen=True)
class Occurrence:
    """An event worth telling subscribers about, before it is addressed to any."""

    type: EventType
    key: str
    at: datetime
    job: JobInfo
    finding: FindingInfo | None = None


_SEEN = ("phase", "labels", "created_at", "started_at", "finished_at")
"""What a job's context says beyond its identity: what was last seen of it."""


def _job_info(job: JobRef | JobObserved, seen: JobObserved | NotifyJob | None) -> JobInfo:
    """The context of an event about ``job``: its identity, and what was last ``seen`` of it (only
    its identity if unseen)."""
    state = {} if seen is None else {field: getattr(seen, field) for field in _SEEN}
    return JobInfo(uid=job.uid, kind=job.kind, namespace=job.namespace, name=job.name, **state)


def job_occurrences(previous: NotifyJob | None, event: JobObserved) -> tuple[list[Occurrence], Row | None]:
    """The transitions ``event`` makes from ``previous``, and the state to store (``None``: keep)."""
    rv = resource_version_order(event.resource_version)
    deleted = event.change == "DELETED"
    if previous is not None and (
        previous.deleted
        or (rv and (rv < previous.resource_version or (rv == previous.resource_version and not deleted)))
    ):  # a deletion may repeat the last version (told after a restart of the watcher): still news
        return [], None
    types: list[EventType] = []
    if previous is None and not deleted:
        types.append("job.created")
    phase_event = _PHASE_EVENTS.get(event.phase)
    if phase_event and not deleted and (previous is None or previous.phase != event.phase):
        if phase_event != "job.running" and event.started_at is not None and not _has_run(previous):
            types.append("job.running")  # it ran meanwhile: the Running observation was missed or is late
        types.append(phase_event)
    if deleted:
        types.append("job.deleted")
    when: dict[EventType, datetime | None] = {
        "job.created": event.created_at,
        "job.running": event.started_at,
        "job.succeeded": event.finished_at,
        "job.failed": event.finished_at,
    }
    info = _job_info(event, event)
    occurrences = [
        Occurrence(t, f"{t}:{event.uid}:{event.resource_version}", when.get(t) or event.observed_at, info)
        for t in types
    ]
    state = {
        "uid": event.uid,
        "namespace": event.namespace,
        "name": event.name,
        "kind": event.kind,
        "phase": event.phase,
        "labels": event.labels,
        "resource_version": rv,
        "deleted": deleted,
        "created_at": event.created_at,
        "started_at": event.started_at,
        "finished_at": event.finished_at,
    }
    return occurrences, state


def _has_run(previous: NotifyJob | None) -> bool:
    """Whether ``job.running`` was announced (or implied) for the job already."""
    return previous is not None and previous.phase in _PHASE_EVENTS


def finding_occurrence(
    previous: NotifyFinding | None, finding: Finding, job: JobInfo
) -> tuple[Occurrence | None, Row | None]:
    """The event ``finding`` makes if it changes its status, and the state to store.

    ``finding.firing`` when it is confirmed (new, or from pending or resolved);
    ``finding.observed`` when it starts as a pending observation (delivered only where asked
    for by name); ``finding.resolved`` only for one that was announced firing — an observation
    the run recovered from ends without a word."""
    if previous is not None and finding.revision <= previous.revision:
        return None, None
    state = {"id": finding.id, "status": finding.status, "revision": finding.revision}
    was = previous.status if previous is not None else None
    kind: EventType | None = None
    if finding.status == "firing" and was != "firing":
        kind = "finding.firing"
    elif finding.status == "pending" and was not in ("pending", "firing"):
        kind = "finding.observed"
    elif finding.status == "resolved" and was == "firing":
        kind = "finding.resolved"
    if kind is None:
        return None, state
    info = FindingInfo(**finding.model_dump(include=set(FindingInfo.model_fields)))
    at = finding.resolved_at if kind == "finding.resolved" and finding.resolved_at else finding.last_seen
    return Occurrence(kind, f"{kind}:{finding.id}:{finding.revision}", at, job, info), state


class Notifier:
    """Turns batches of bus messages into outbox rows (see the module docstring)."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: NotifySettings,
        metrics: NotifyMetrics,
        clock: Clock = utcnow,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self._engine = engine
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._wake = wake
        self._fingerprint: tuple[int, int] | None = None
        self._by_name: dict[str | None, list[tuple[SubscriptionRecord, Filters]]] = {}

    async def observe_jobs(self, events: Sequence[BusEvent]) -> int:
        """Fold job observations in; returns how many deliveries were enqueued."""
        jobs = [e for e in events if isinstance(e, JobObserved)]
        if not jobs:
            return 0
        async with self._batch() as conn:
            known: dict[str, NotifyJob | None] = dict(
                await notifystate.job_states(conn, {j.uid for j in jobs})
            )
            occurrences: list[Occurrence] = []
            changed: dict[str, Row] = {}
            for job in jobs:
                found, state = job_occurrences(known.get(job.uid), job)
                occurrences += found
                if state is not None:
                    changed[job.uid] = state
                    known[job.uid] = NotifyJob(**state)
            await notifystate.save_job_states(conn, list(changed.values()))
            enqueued = await self._fan_out(conn, occurrences)
        return self._enqueued(enqueued)

    async def observe_findings(self, findings: Sequence[Finding]) -> int:
        """Fold finding changes in; returns how many deliveries were enqueued."""
        if not findings:
            return 0
        async with self._batch() as conn:
            known: dict[str, NotifyFinding | None] = dict(
                await notifystate.finding_states(conn, {f.id for f in findings})
            )
            jobs = await notifystate.job_states(conn, {f.job.uid for f in findings})
            occurrences: list[Occurrence] = []
            changed: dict[str, Row] = {}
            alerting = bool(self._settings.alertmanager.urls)
            for finding in sorted(findings, key=lambda f: f.revision):
                job = jobs.get(finding.job.uid)
                info = _job_info(finding.job, job)
                previous = known.get(finding.id)
                found, state = finding_occurrence(previous, finding, info)
                if found is not None:
                    occurrences.append(found)
                if state is not None:
                    changed[finding.id] = state
                    known[finding.id] = NotifyFinding(**state)
                    if alerting:
                        await self._alert(conn, finding, info, previous)
            await notifystate.save_finding_states(conn, list(changed.values()))
            enqueued = await self._fan_out(conn, occurrences)
        return self._enqueued(enqueued)

    async def _alert(
        self, conn: AsyncConnection, finding: Finding, job: JobInfo, previous: NotifyFinding | None
    ) -> None:
        """Keep the Alertmanager sink's state of ``finding`` (a newer revision than ``previous``)."""
        now = self._clock()
        if finding.status == "pending":
            return  # evidence, not a verdict: no alert until it fires
        if finding.status == "firing":
            again = previous is not None and previous.status == "resolved"
            await alerts.fire(conn, [alert_row(finding, job, self._settings, now, again=again)])
        elif previous is not None and previous.status == "firing":
            ended = min(finding.resolved_at or now, now)  # a resolve in the future would still fire
            await alerts.resolve(conn, finding.id, ended, now)

    @contextlib.asynccontextmanager
    async def _batch(self) -> AsyncIterator[AsyncConnection]:
        """One batch's transaction, serialized across replicas by an advisory lock."""
        try:
            async with self._engine.begin() as conn:
                await lock_transaction(conn, _LOCK_KEY)
                yield conn
        except IntegrityError as exc:  # a subscription was deleted while its rows were written
            self._fingerprint = None
            raise RetryableError(f"outbox write raced a subscription change: {exc.orig}") from exc

    def _enqueued(self, rows: list[Row]) -> int:
        for row in rows:
            self._metrics.enqueued.labels(row["channel"], row["event_type"]).inc()
        if rows:
            self._wake()
        return len(rows)

    async def _fan_out(self, conn: AsyncConnection, occurrences: Sequence[Occurrence]) -> list[Row]:
        """Address every occurrence to the subscriptions that want it; returns the new rows."""
        if not occurrences:
            return []
        now = self._clock()
        by_name = await self._subscribers(conn)
        fired: set[str] = set()
        rows: list[Row] = []
        for occurrence in occurrences:
            for sub, filters in by_name.get(occurrence.job.name, []) + by_name.get(None, []):
                if sub.id in fired or (sub.expires_at is not None and sub.expires_at <= now):
                    continue
                if not filters.matches(occurrence.type, occurrence.job, occurrence.finding):
                    continue
                if sub.one_shot:
                    fired.add(sub.id)
                    if not await subscriptions.expire_one_shot(conn, sub.id, now):
                        continue
                    log.info("one-shot subscription %s fired on %s and expired", sub.id, occurrence.type)
                rows.append(self._row(sub, occurrence, now))
        new = await outbox.enqueue(conn, rows)
        return [row for row in rows if row["id"] in new]

    async def _subscribers(
        self, conn: AsyncConnection
    ) -> dict[str | None, list[tuple[SubscriptionRecord, Filters]]]:
        """Active subscriptions with parsed filters, by job name (a pipeline's are not tried on every job)."""
        fingerprint = await subscriptions.active_fingerprint(conn)
        if fingerprint != self._fingerprint:
            by_name: dict[str | None, list[tuple[SubscriptionRecord, Filters]]] = {}
            for sub in sorted(await subscriptions.active_subscriptions(conn), key=lambda s: s.id):
                try:
                    by_name.setdefault(sub.job_name, []).append((sub, _filters(sub)))
                except FilterError as exc:  # stored before a validation change: skip it, loudly
                    log.error("subscription %s has a filter that no longer parses: %s", sub.id, exc)
            self._fingerprint, self._by_name = fingerprint, by_name
        return self._by_name

    def _row(self, sub: SubscriptionRecord, occurrence: Occurrence, now: datetime) -> Row:
        job = occurrence.job
        anchor = occurrence.finding.doc_anchor if occurrence.finding else None
        body = WebhookEvent(
            type=occurrence.type,
            timestamp=occurrence.at,
            data=EventData(
                subscription_id=sub.id,
                job=job,
                finding=occurrence.finding,
                links=links(self._settings.public_url, self._settings.docs_url, job.uid, anchor),
            ),
        )
        return {
            "id": outbox.delivery_id(sub.id, occurrence.key),
            "subscription_id": sub.id,
            "channel": sub.channel,
            "event_type": occurrence.type,
            "order_key": job.uid if sub.channel == "webhook" else f"{job.namespace}/{job.name}",
            "namespace": job.namespace,
            "job_name": job.name,
            "job_uid": job.uid,
            "body": body.model_dump_json(),
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "event_at": occurrence.at,
            "created_at": now,
        }


def _filters(sub: SubscriptionRecord) -> Filters:
    return Filters.of(
        sub.namespace, sub.job_name, sub.label_selector, sub.event_types, sub.rules, sub.severities
    )


async def prepare(js: JetStreamContext, topology: Topology, settings: ConsumerSettings) -> None:
    """Before subscribing: bring durables declared by an earlier version to today's shape — the
    jobs durable filtered to job observations, the findings durable ordered."""
    await align_durable(
        js,
        topology.stream("jobs"),
        topology.durable(CONSUMER),
        subject=topology.job_observations(),
        max_ack_pending=max_ack_pending(settings, ordered=False),
    )
    await align_durable(
        js,
        topology.stream("findings"),
        topology.durable(FINDINGS_CONSUMER),
        subject=topology.wildcard("findings"),
        max_ack_pending=max_ack_pending(settings, ordered=True),
    )


def durables(
    topology: Topology,
    notify: NotifySettings,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    clock: Clock = utcnow,
    wake: Callable[[], None] = lambda: None,
) -> tuple[Durable[BusEvent], Durable[Finding]]:
    """The notify durables; ``wake`` nudges an in-process dispatcher."""
    notifier = Notifier(engine, notify, NotifyMetrics.on(metrics.registry), clock, wake)

    async def jobs(events: Sequence[BusEvent]) -> None:
        await notifier.observe_jobs(events)

    async def findings(batch: Sequence[Finding]) -> None:
        await notifier.observe_findings(batch)

    return (
        # job observations only: pods and Kubernetes events never make a notification
        Durable("jobs", CONSUMER, parse_event, jobs, subject=topology.job_observations()),
        Durable("findings", FINDINGS_CONSUMER, parse_finding, findings, ordered=True),
    )


async def attach(wiring: Wiring) -> Role:
    """The notify role: phase transitions and finding changes into the outbox.

    Dispatchers in any process hear of new rows through PostgreSQL ``NOTIFY`` at commit."""
    await prepare(wiring.js, wiring.topology, wiring.settings.consumer)
    return Role(
        durables(wiring.topology, wiring.settings.notify, wiring.engine, wiring.metrics, wiring.clock)
    )
