"""Write side of the history store: apply a batch of bus events in one transaction.

Idempotent and order-tolerant by construction, and safe side by side (the history consumer
runs as several replicas, each writing its own batches): every statement writes its rows
in key order, so two batches that touch the same pods lock them in the same order and never
deadlock.

- current-state rows (runs, pods, Kubernetes events) are upserted only when the incoming
  ``resourceVersion`` is not older than the stored one, so a late, out-of-order message
  never regresses a run from Failed back to Running;
- history rows (pod states, timeline) carry a natural key and are inserted with
  ``ON CONFLICT DO NOTHING``, so replaying a stream twice yields the same rows;
- attempt numbers of runs that share a job name are recomputed from creation times, so
  they do not depend on which run was seen first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import func, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.contract.events import (
    BusEvent,
    ContainerState,
    JobObserved,
    K8sEventObserved,
    PodObserved,
)
from controller.contract.findings import Finding
from controller.contract.kubeflow import resource_version_order
from controller.store.models import FindingRow, K8sEvent, Pod, PodState, Run, TimelineEntry

Row = dict[str, Any]
_E = TypeVar("_E", JobObserved, PodObserved, K8sEventObserved)


def _latest(events: Iterable[_E]) -> list[_E]:
    """One event per uid: the newest resourceVersion (the later one on a tie), in uid order."""
    latest: dict[str, _E] = {}
    for event in events:
        held = latest.get(event.uid)
        if held is None or resource_version_order(held.resource_version) <= resource_version_order(
            event.resource_version
        ):
            latest[event.uid] = event
    return [latest[uid] for uid in sorted(latest)]


def _dump(items: Sequence[Any]) -> list[Any]:
    return [item.model_dump(mode="json", exclude_defaults=True) for item in items]


def _job_row(event: JobObserved) -> Row:
    return {
        "uid": event.uid,
        "kind": event.kind,
        "namespace": event.namespace,
        "name": event.name,
        "attempt": 1,
        "phase": event.phase,
        "resource_version": resource_version_order(event.resource_version),
        "conditions": _dump(event.conditions),
        "spec": event.spec.model_dump(mode="json", exclude_none=True),
        "labels": event.labels,
        "created_at": event.created_at,
        "started_at": event.started_at,
        "finished_at": event.finished_at,
        "deleted_at": event.observed_at if event.change == "DELETED" else None,
        "first_observed_at": event.observed_at,
        "last_observed_at": event.observed_at,
    }


def _job_timeline(event: JobObserved) -> Row:
    if event.change == "DELETED":
        return _timeline(
            event.uid,
            event.observed_at,
            "job",
            f"{event.kind} {event.name} deleted",
            {"phase": event.phase},
            f"job:{event.uid}:deleted",
        )
    at = {
        "Pending": event.created_at,
        "Running": event.started_at,
        "Succeeded": event.finished_at,
        "Failed": event.finished_at,
    }.get(event.phase) or event.observed_at
    reason = next(
        (c.reason for c in event.conditions if c.type in {event.phase, "Complete"} and c.reason), None
    )
    summary = f"{event.kind} {event.name} is {event.phase}" + (f" ({reason})" if reason else "")
    return _timeline(
        event.uid,
        at,
        "job",
        summary,
        {"phase": event.phase, "reason": reason},
        f"job:{event.uid}:phase:{event.phase}",
    )


def _pod_label(event: PodObserved) -> str:
    return event.role if event.index is None else f"{event.role}-{event.index}"


def _pod_row(event: PodObserved, containers: list[Any]) -> Row:
    return {
        "uid": event.uid,
        "run_uid": event.job.uid,
        "namespace": event.namespace,
        "name": event.name,
        "role": event.role,
        "index": event.index,
        "phase": event.phase,
        "reason": event.reason,
        "node": event.node,
        "resource_version": resource_version_order(event.resource_version),
        "restart_count": sum(c.restart_count for c in event.containers),
        "containers": containers,
        "resources": event.resources.model_dump(mode="json"),
        "created_at": event.created_at,
        "last_observed_at": event.observed_at,
        "deleted_at": event.observed_at if event.change == "DELETED" else None,
    }


def _pod_state_row(event: PodObserved, containers: list[Any]) -> Row:
    return {
        "pod_uid": event.uid,
        "run_uid": event.job.uid,
        "resource_version": resource_version_order(event.resource_version),
        "phase": event.phase,
        "reason": event.reason,
        "node": event.node,
        "containers": containers,
        "log_tail": list(event.log_tail),
        "observed_at": event.observed_at,
    }


def _container_timeline(event: PodObserved, container: ContainerState) -> Row | None:
    who = f"{_pod_label(event)} container {container.name}"
    key = f"pod:{event.uid}:{container.name}:{container.restart_count}"
    detail = container.model_dump(mode="json", exclude_none=True)
    if container.state == "terminated":
        how = container.reason or "terminated"
        code = f" (exit {container.exit_code})" if container.exit_code is not None else ""
        return _timeline(
            event.job.uid,
            container.finished_at or event.observed_at,
            "pod",
            f"{who} terminated: {how}{code}",
            detail,
            f"{key}:terminated",
        )
    if container.state == "waiting" and container.reason not in {
        None,
        "ContainerCreating",
        "PodInitializing",
    }:
        return _timeline(
            event.job.uid,
            event.observed_at,
            "pod",
            f"{who} waiting: {container.reason}",
            detail,
            f"{key}:waiting:{container.reason}",
        )
    return None


def _pod_timeline(event: PodObserved) -> list[Row]:
    where = f" on {event.node}" if event.node else ""
    reason = f" ({event.reason})" if event.reason else ""
    rows = [
        _timeline(
            event.job.uid,
            event.observed_at,
            "pod",
            f"{_pod_label(event)} pod {event.name} {event.phase}{reason}{where}",
            {"pod": event.name, "phase": event.phase, "reason": event.reason, "node": event.node},
            f"pod:{event.uid}:phase:{event.phase}",
        )
    ]
    if event.change == "DELETED":
        rows.append(
            _timeline(
                event.job.uid,
                event.observed_at,
                "pod",
                f"{_pod_label(event)} pod {event.name} deleted",
                {"pod": event.name},
                f"pod:{event.uid}:deleted",
            )
        )
    rows.extend(row for c in event.containers if (row := _container_timeline(event, c)) is not None)
    return rows


def _k8s_event_row(event: K8sEventObserved) -> Row:
    return {
        "uid": event.uid,
        "run_uid": event.job.uid,
        "reason": event.reason,
        "message": event.message,
        "event_type": event.event_type,
        "involved_kind": event.involved.kind,
        "involved_name": event.involved.name,
        "count": event.count,
        "first_timestamp": event.first_timestamp,
        "last_timestamp": event.last_timestamp,
        "resource_version": resource_version_order(event.resource_version),
    }


def _k8s_event_timeline(event: K8sEventObserved) -> Row:
    repeat = f" (x{event.count})" if event.count > 1 else ""
    return _timeline(
        event.job.uid,
        event.last_timestamp or event.observed_at,
        "event",
        f"{event.event_type} {event.reason} on {event.involved.kind} {event.involved.name}: "
        f"{event.message}{repeat}",
        {"reason": event.reason, "type": event.event_type, "count": event.count},
        f"event:{event.uid}:{event.count}",
    )


def _timeline(run_uid: str, at: datetime, source: str, summary: str, detail: Row, key: str) -> Row:
    return {
        "run_uid": run_uid,
        "at": at,
        "source": source,
        "summary": summary,
        "detail": detail,
        "dedup_key": key,
    }


def _upsert(
    model: type[Run] | type[Pod] | type[K8sEvent] | type[FindingRow],
    rows: list[Row],
    keep: Sequence[str] = (),
    key: str = "uid",
    version: str = "resource_version",
) -> Any:
    """INSERT … ON CONFLICT (key) DO UPDATE unless the stored row has a newer ``version``."""
    stmt = insert(model)
    coalesced = {"started_at", "finished_at", "deleted_at"}
    table = model.__table__.c
    updated = {
        name: (func.coalesce(stmt.excluded[name], table[name]) if name in coalesced else stmt.excluded[name])
        for name in rows[0]
        if name not in {key, *keep}
    }
    return stmt.on_conflict_do_update(
        index_elements=[key], set_=updated, where=table[version] <= stmt.excluded[version]
    )


async def _renumber_attempts(conn: AsyncConnection, jobs: list[JobObserved]) -> None:
    """Attempt n of a job name is its n-th run by creation time; link each to the one before."""
    keys = {(job.namespace, job.kind, job.name) for job in jobs}
    partition, order = (Run.namespace, Run.kind, Run.name), (Run.created_at, Run.uid)
    ranked = (
        select(
            Run.uid.label("uid"),
            func.row_number().over(partition_by=partition, order_by=order).label("attempt"),
            func.lag(Run.uid).over(partition_by=partition, order_by=order).label("previous_uid"),
        )
        .where(tuple_(Run.namespace, Run.kind, Run.name).in_(list(keys)))
        .subquery()
    )
    await conn.execute(
        update(Run)
        .where(Run.uid == ranked.c.uid)
        .where((Run.attempt != ranked.c.attempt) | Run.previous_uid.is_distinct_from(ranked.c.previous_uid))
        .values(attempt=ranked.c.attempt, previous_uid=ranked.c.previous_uid)
    )


async def apply_events(conn: AsyncConnection, events: Sequence[BusEvent]) -> None:
    """Write a batch of observations; the caller owns the transaction."""
    jobs = _latest(e for e in events if isinstance(e, JobObserved))
    pods = [e for e in events if isinstance(e, PodObserved)]
    k8s_events = [e for e in events if isinstance(e, K8sEventObserved)]
    timeline: list[Row] = []

    if jobs:
        await conn.execute(
            _upsert(Run, [_job_row(j) for j in jobs], keep=("first_observed_at", "attempt")),
            [_job_row(j) for j in jobs],
        )
        await _renumber_attempts(conn, jobs)
        timeline += [_job_timeline(e) for e in events if isinstance(e, JobObserved)]
    if pods:
        containers = {id(p): _dump(p.containers) for p in pods}
        rows = [_pod_row(p, containers[id(p)]) for p in _latest(pods)]
        await conn.execute(_upsert(Pod, rows), rows)
        states = sorted(
            (_pod_state_row(p, containers[id(p)]) for p in pods),
            key=lambda row: (row["pod_uid"], row["resource_version"]),
        )
        await conn.execute(insert(PodState).on_conflict_do_nothing(), states)
        timeline += [row for pod in pods for row in _pod_timeline(pod)]
    if k8s_events:
        rows = [_k8s_event_row(e) for e in _latest(k8s_events)]
        await conn.execute(_upsert(K8sEvent, rows), rows)
        timeline += [_k8s_event_timeline(e) for e in k8s_events]
    if timeline:
        await conn.execute(insert(TimelineEntry).on_conflict_do_nothing(), _unique_timeline(timeline))


def _unique_timeline(rows: Iterable[Row]) -> list[Row]:
    """The first row of each ``dedup_key``, in key order."""
    unique: dict[str, Row] = {}
    for row in rows:
        unique.setdefault(row["dedup_key"], row)
    return [unique[key] for key in sorted(unique)]


def _finding_row(finding: Finding) -> Row:
    return {
        "id": finding.id,
        "run_uid": finding.job.uid,
        "namespace": finding.job.namespace,
        "job_name": finding.job.name,
        "rule": finding.rule,
        "severity": finding.severity,
        "status": finding.status,
        "root_cause": finding.root_cause,
        "evidence": _dump(finding.evidence),
        "remediation": list(finding.remediation),
        "doc_anchor": finding.doc_anchor,
        "revision": finding.revision,
        "superseded_by": finding.superseded_by,
        "first_seen": finding.first_seen,
        "last_seen": finding.last_seen,
        "resolved_at": finding.resolved_at,
    }


def _finding_timeline(finding: Finding) -> Row:
    at = finding.resolved_at if finding.status == "resolved" and finding.resolved_at else finding.last_seen
    verb = "resolved" if finding.status == "resolved" else f"{finding.severity}"
    return _timeline(
        finding.job.uid,
        at,
        "finding",
        f"Finding {finding.rule} ({verb}): {finding.root_cause}",
        {"finding": finding.id, "rule": finding.rule, "status": finding.status, "revision": finding.revision},
        f"finding:{finding.id}:{finding.revision}",
    )


async def apply_findings(conn: AsyncConnection, findings: Sequence[Finding]) -> None:
    """Store the newest revision of each finding and add every change to its run's timeline."""
    latest: dict[str, Finding] = {}
    for finding in findings:
        if finding.id not in latest or latest[finding.id].revision <= finding.revision:
            latest[finding.id] = finding
    rows = [_finding_row(latest[key]) for key in sorted(latest)]
    await conn.execute(_upsert(FindingRow, rows, key="id", version="revision"), rows)
    await conn.execute(
        insert(TimelineEntry).on_conflict_do_nothing(), _unique_timeline(map(_finding_timeline, findings))
    )


async def ping(conn: AsyncConnection) -> None:
    """Raise if the database does not answer."""
    await conn.execute(text("SELECT 1"))
