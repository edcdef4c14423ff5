"""What the notify consumer compared last: each job's and finding's state, so a redelivered or
repeated observation is told apart from a change (``notify_jobs``, ``notify_findings``).

:mod:`consumers.notify.consumer` reads them (:func:`job_states`, :func:`finding_states`) and
saves what it saw (:func:`save_job_states`, :func:`save_finding_states`) in the transaction that
enqueues the deliveries (:func:`controller.store.outbox.enqueue`); a stored newer
resourceVersion or revision wins, so replicas never move a state backwards.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.store.bulk import among
from controller.store.models import NotifyFinding, NotifyJob

__all__ = ["finding_states", "job_states", "save_finding_states", "save_job_states"]

Row = dict[str, Any]


_JOB_TIMES = ("created_at", "started_at", "finished_at")


async def job_states(conn: AsyncConnection, uids: Collection[str]) -> dict[str, NotifyJob]:
    rows = await conn.execute(select(NotifyJob).where(among(NotifyJob.uid, uids)))
    return {row.uid: NotifyJob(**row._mapping) for row in rows}


async def save_job_states(conn: AsyncConnection, rows: Sequence[Row]) -> None:
    """Upsert job states; a stored newer resourceVersion wins."""
    if rows:
        stmt = pg_insert(NotifyJob)
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["uid"],
                set_={
                    c: stmt.excluded[c]
                    for c in ("phase", "labels", "resource_version", "deleted", *_JOB_TIMES)
                },
                where=NotifyJob.resource_version <= stmt.excluded.resource_version,
            ),
            list(rows),
        )


async def finding_states(conn: AsyncConnection, ids: Collection[str]) -> dict[str, NotifyFinding]:
    rows = await conn.execute(select(NotifyFinding).where(among(NotifyFinding.id, ids)))
    return {row.id: NotifyFinding(**row._mapping) for row in rows}


async def save_finding_states(conn: AsyncConnection, rows: Sequence[Row]) -> None:
    """Upsert finding states; a stored newer revision wins."""
    if rows:
        stmt = pg_insert(NotifyFinding)
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["id"],
                set_={"status": stmt.excluded.status, "revision": stmt.excluded.revision},
                where=NotifyFinding.revision <= stmt.excluded.revision,
            ),
            list(rows),
        )
