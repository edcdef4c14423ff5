"""Read side of the history store, shared by the CLI and the API (never inline in handlers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.db import FindingRow, K8sEvent, Pod, Run, TimelineEntry


@dataclass(frozen=True)
class RunFilter:
    """Filters of the runs list; ``None`` means any."""

    namespace: str | None = None
    name: str | None = None
    kind: str | None = None
    phase: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


def _filtered(query: Select[tuple[Run]], where: RunFilter) -> Select[tuple[Run]]:
    for column, value in (
        (Run.namespace, where.namespace),
        (Run.name, where.name),
        (Run.kind, where.kind),
        (Run.phase, where.phase),
    ):
        if value is not None:
            query = query.where(column == value)
    if where.created_after is not None:
        query = query.where(Run.created_at >= where.created_after)
    if where.created_before is not None:
        query = query.where(Run.created_at < where.created_before)
    return query


async def list_runs(
    conn: AsyncConnection,
    where: RunFilter = RunFilter(),
    limit: int = 50,
    before: tuple[datetime, str] | None = None,
) -> Sequence[Run]:
    """Runs newest first; ``before`` is the (created_at, uid) cursor of the last row already seen."""
    query = _filtered(select(Run), where)
    if before is not None:
        query = query.where((Run.created_at, Run.uid) < before)  # type: ignore[operator]
    rows = await conn.execute(query.order_by(Run.created_at.desc(), Run.uid.desc()).limit(limit))
    return [Run(**row._mapping) for row in rows]


async def get_run(conn: AsyncConnection, uid: str) -> Run | None:
    """One run by uid."""
    row = (await conn.execute(select(Run).where(Run.uid == uid))).first()
    return Run(**row._mapping) if row else None


async def run_pods(conn: AsyncConnection, uid: str) -> Sequence[Pod]:
    """Pods of a run: launcher first, then workers by index."""
    rows = await conn.execute(select(Pod).where(Pod.run_uid == uid).order_by(Pod.role, Pod.index, Pod.name))
    return [Pod(**row._mapping) for row in rows]


async def run_timeline(conn: AsyncConnection, uid: str) -> Sequence[TimelineEntry]:
    """A run's timeline in time order."""
    rows = await conn.execute(
        select(TimelineEntry).where(TimelineEntry.run_uid == uid).order_by(TimelineEntry.at, TimelineEntry.id)
    )
    return [TimelineEntry(**row._mapping) for row in rows]


async def run_events(conn: AsyncConnection, uid: str) -> Sequence[K8sEvent]:
    """Kubernetes events about a run, oldest first."""
    rows = await conn.execute(
        select(K8sEvent).where(K8sEvent.run_uid == uid).order_by(K8sEvent.last_timestamp)
    )
    return [K8sEvent(**row._mapping) for row in rows]


async def run_findings(conn: AsyncConnection, uid: str) -> Sequence[FindingRow]:
    """Findings of a run: firing first, then by when they were first seen."""
    rows = await conn.execute(
        select(FindingRow)
        .where(FindingRow.run_uid == uid)
        .order_by((FindingRow.status == "firing").desc(), FindingRow.first_seen)
    )
    return [FindingRow(**row._mapping) for row in rows]
