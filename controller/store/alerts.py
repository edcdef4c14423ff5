"""What the Alertmanager sink owes: firing alerts, and resolves not yet taken by every Alertmanager.

The notify consumer writes a row when a finding fires (or changes while firing) and marks it
resolved when the finding resolves, in the transaction that acknowledges the bus message,
and announces :data:`WAKE_CHANNEL`. The Alertmanager pushers read from here alone, so a
restart of either side, or an Alertmanager that was down, loses nothing: firing rows are
sent again every resend interval, and a resolved row stays until every configured
Alertmanager accepted its resolve (:func:`resolve_taken`), then it is deleted
(:func:`purge_resolved`).

Every write takes the next ``change`` number (a sequence). The consumer writes under its
advisory lock, one batch after another, so changes commit in ``change`` order: a pusher that
has sent everything up to N asks for ``change > N`` and misses nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.store.models import NotifyAlert
from controller.store.wakeups import announce

WAKE_CHANNEL = "mpijc_alerts"
"""PostgreSQL channel announced when an alert starts, changes or resolves."""

Row = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Alert:
    """One row of ``notify_alerts`` (see :class:`controller.store.models.NotifyAlert`), as read:
    a plain record, several times cheaper to build than an ORM instance."""

    finding_id: str
    labels: dict[str, str]
    annotations: dict[str, str]
    generator_url: str
    starts_at: datetime
    ends_at: datetime | None
    resolved_to: list[str]
    updated_at: datetime
    change: int


_NEXT = func.nextval("notify_alerts_change")


async def fire(conn: AsyncConnection, rows: Sequence[Row]) -> None:
    """Upsert firing alerts (keys of :class:`NotifyAlert` but ``ends_at``/``resolved_to``); one
    firing again after its resolve starts a new episode at the given ``starts_at``."""
    if not rows:
        return
    stmt = pg_insert(NotifyAlert).values([{**row, "ends_at": None, "resolved_to": []} for row in rows])
    was_resolved = NotifyAlert.ends_at.is_not(None)
    await conn.execute(
        stmt.on_conflict_do_update(
            index_elements=["finding_id"],
            set_={
                "labels": stmt.excluded.labels,
                "annotations": stmt.excluded.annotations,
                "generator_url": stmt.excluded.generator_url,
                "starts_at": case((was_resolved, stmt.excluded.starts_at), else_=NotifyAlert.starts_at),
                "ends_at": None,
                "resolved_to": [],
                "updated_at": stmt.excluded.updated_at,
                "change": _NEXT,
            },
        )
    )
    await announce(conn, WAKE_CHANNEL)


async def resolve(conn: AsyncConnection, finding_id: str, ends_at: datetime, now: datetime) -> bool:
    """Mark a firing alert resolved at ``ends_at``; ``False`` if none was firing."""
    result = await conn.execute(
        update(NotifyAlert)
        .where(NotifyAlert.finding_id == finding_id, NotifyAlert.ends_at.is_(None))
        .values(ends_at=ends_at, updated_at=now, change=_NEXT)
    )
    if result.rowcount:
        await announce(conn, WAKE_CHANNEL)
    return bool(result.rowcount)


async def owed(conn: AsyncConnection, url: str, after: int | None = None) -> list[Alert]:
    """What ``url`` is owed: firing alerts and resolves it has not taken (only changes numbered
    above ``after``, when given), in change order."""
    query = select(NotifyAlert).where(NotifyAlert.ends_at.is_(None) | ~NotifyAlert.resolved_to.has_key(url))
    if after is not None:
        query = query.where(NotifyAlert.change > after)
    rows = await conn.execute(query.order_by(NotifyAlert.change))
    return [Alert(**row._mapping) for row in rows]


async def resolve_taken(conn: AsyncConnection, url: str, sent: Collection[Alert]) -> None:
    """Record that ``url`` accepted these resolves (unless the alert changed since it was read)."""
    for alert in sent:
        if alert.ends_at is None:
            continue
        await conn.execute(
            update(NotifyAlert)
            .where(
                NotifyAlert.finding_id == alert.finding_id,
                NotifyAlert.change == alert.change,
                ~NotifyAlert.resolved_to.has_key(url),
            )
            .values(resolved_to=NotifyAlert.resolved_to.concat(func.jsonb_build_array(url)))
        )


async def purge_resolved(conn: AsyncConnection, urls: Sequence[str]) -> int:
    """Delete resolved alerts every one of ``urls`` has taken; returns how many."""
    result = await conn.execute(
        delete(NotifyAlert).where(
            NotifyAlert.ends_at.is_not(None), NotifyAlert.resolved_to.contains(list(urls))
        )
    )
    return result.rowcount


async def counts(conn: AsyncConnection) -> tuple[int, int]:
    """(firing alerts, resolves still owed to some Alertmanager)."""
    row = (
        await conn.execute(
            select(
                func.count().filter(NotifyAlert.ends_at.is_(None)),
                func.count().filter(NotifyAlert.ends_at.is_not(None)),
            )
        )
    ).one()
    return int(row[0]), int(row[1])
