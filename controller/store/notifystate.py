"""What the notify consumer compared last: each job's and finding's state, so a redelivered or
repeated observation is told apart from a change (``notify_jobs``, ``notify_findings``).

:mod:`consumers.notify.consumer` reads them (:func:`job_states`, :func:`finding_states`) and
saves what it saw (:func:`save_job_states`, :func:`save_finding_states`) in the transaction that
enqueues the deliveries (:func:`controller.store.outbox.enqueue`); a stored newer
resourceVersion or revision wins, so replicas never move a state backwards.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.store.bulk import among
from controller.store.models import NotifyFinding, NotifyJob

__all__ = ["finding_states", "job_states", "save_finding_states", "save_job_states"]

Row = dict[str, Any]
State = TypeVar("State", NotifyJob, NotifyFinding)
"""A state the notify consumer keeps: a job's or a finding's."""


_JOB_TIMES = ("created_at", "started_at", "finished_at")


async def job_states(conn: AsyncConnection, uids: Collection[str]) -> dict[str, NotifyJob]:
    return await _states(conn, NotifyJob, "uid", uids)


async def save_job_states(conn: AsyncConnection, rows: Sequence[Row]) -> None:
    """Upsert job states; a stored newer resourceVersion wins."""
    changing = ("phase", "labels", "resource_version", "deleted", *_JOB_TIMES)
    await _save_newer(conn, NotifyJob, "uid", changing, "resource_version", rows)


async def finding_states(conn: AsyncConnection, ids: Collection[str]) -> dict[str, NotifyFinding]:
    return await _states(conn, NotifyFinding, "id", ids)


async def save_finding_states(conn: AsyncConnection, rows: Sequence[Row]) -> None:
    """Upsert finding states; a stored newer revision wins."""
    await _save_newer(conn, NotifyFinding, "id", ("status", "revision"), "revision", rows)


async def _states(
    conn: AsyncConnection, model: type[State], key: str, keys: Collection[str]
) -> dict[str, State]:
    """The stored states of ``model`` whose ``key`` is among ``keys``, by key."""
    rows = await conn.execute(select(model).where(among(getattr(model, key), keys)))
    return {row._mapping[key]: model(**row._mapping) for row in rows}


async def _save_newer(
    conn: AsyncConnection,
    model: type[State],
    key: str,
    changing: Sequence[str],
    version: str,
    rows: Sequence[Row],
) -> None:
    """Upsert ``rows`` of ``model`` by ``key``, setting ``changing``; a stored newer ``version`` wins."""
    if rows:
        stmt = pg_insert(model)
        await conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[key],
                set_={c: stmt.excluded[c] for c in changing},
                where=getattr(model, version) <= stmt.excluded[version],
            ),
            list(rows),
        )
