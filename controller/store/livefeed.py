"""A run's timeline as it grows, read in id order without gaps: the source of the live event streams.

Timeline ids come from one sequence, so they order a run's entries durably (the same on every API
replica) and a reader can resume after the last id it handed on. One catch: several history
consumer replicas write side by side, so a transaction holding id 100 may commit after another
holding id 101; a reader that saw 101 and moved its cursor past it would never see 100.

:class:`TimelineTail` closes that gap with PostgreSQL's snapshots (``pg_current_snapshot()``):
each poll reads the entries after its cursor and, in the same snapshot, the transactions still in
progress that hold the timeline table's insert lock (only they can have drawn ids not yet
visible; the snapshot's transaction ids are cluster-wide, so unrelated writers in other databases
or tables must not hold a stream up). Entries are handed on only up to an id below which nothing
can still appear: at once when no such transaction was in progress, or else once every one of
them has ended (the next poll that sees them gone rereads the range, late commits included). It
relies on what :mod:`controller.store.history` does: every transaction writes another table before
its timeline rows, so it holds a transaction id before it draws timeline ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ARRAY, Select, String, column, select, text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from controller.store.models import FindingRow, Run, TimelineEntryRow
from controller.store.queries import LISTED

__all__ = [
    "TERMINAL",
    "TailPoll",
    "TimelineTail",
    "XidSnapshot",
    "attempt",
    "firing_findings",
    "newest_attempt",
    "next_attempt",
    "poll_tails",
]

TERMINAL = frozenset({"Succeeded", "Failed"})
"""Phases a run does not leave."""


@dataclasses.dataclass(frozen=True)
class XidSnapshot:
    """Which transactions a PostgreSQL snapshot saw as still in progress."""

    xmin: int
    xmax: int
    in_progress: frozenset[int]

    @classmethod
    def parse(cls, value: str) -> XidSnapshot:
        """``pg_current_snapshot()::text``: ``xmin:xmax:xip,xip,…``."""
        xmin, xmax, xip = value.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(x) for x in xip.split(",") if x))

    def ended(self, xids: frozenset[int]) -> bool:
        """Whether every one of ``xids`` (in progress in an earlier snapshot) has ended in this one."""
        return all(x < self.xmin or (x < self.xmax and x not in self.in_progress) for x in xids)


_NEWS = text("""
WITH now AS MATERIALIZED (SELECT pg_current_snapshot() AS snapshot)
SELECT now.snapshot::text AS snapshot, writers.xids AS writers, entry.*
FROM now
CROSS JOIN LATERAL (
    SELECT coalesce(array_agg(x::text), '{}') AS xids
    FROM pg_snapshot_xip(now.snapshot) AS x
    WHERE pg_xact_status(x) <> 'in progress'
       OR x::text::bigint % 4294967296 IN (
          SELECT held.transactionid::text::bigint
          FROM pg_locks AS lock JOIN pg_locks AS held
            ON held.virtualtransaction = lock.virtualtransaction AND held.locktype = 'transactionid'
          WHERE lock.locktype = 'relation' AND lock.relation = to_regclass('timeline')
            AND lock.database = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND lock.mode = 'RowExclusiveLock')
) AS writers
LEFT JOIN (
    SELECT entry.*
    FROM unnest(CAST(:uids AS text[]), CAST(:cursors AS bigint[])) AS watched(uid, cursor)
    JOIN timeline AS entry ON entry.run_uid = watched.uid AND entry.id > watched.cursor
) AS entry ON true
ORDER BY entry.id
""").columns(
    column("snapshot", String), column("writers", ARRAY(String)), *TimelineEntryRow.__table__.columns
)
"""Watched runs' entries after their cursors, with the snapshot they were read in and, of the transactions in
progress in it, those that matter: any that
holds the timeline table's insert lock (it may have drawn timeline ids), and any that has ended
since (it may have held it; the next poll sees its rows). A transaction still in progress without
the lock has drawn no timeline id yet, so every id it draws will be above those visible now."""


@dataclasses.dataclass(frozen=True)
class TailPoll:
    """One poll: the run as it is now, its new timeline entries, and the findings they name."""

    run: Run | None
    entries: Sequence[TimelineEntryRow]
    findings: dict[str, FindingRow]
    settled: bool
    """No entry is held back: everything this run's timeline holds up to now has been handed on."""


@dataclasses.dataclass
class TimelineTail:
    """The entries of run ``uid``'s timeline after ``cursor`` (a timeline id), each handed on once."""

    uid: str
    cursor: int = 0
    _held: tuple[int, frozenset[int]] | None = None
    """Entries up to this id were seen while these transactions were in progress."""

    async def poll(self, engine: AsyncEngine) -> TailPoll:
        """The entries that can be handed on now, in id order; advances the cursor past them."""
        return (await poll_tails(engine, [self]))[0]

    def absorb(
        self, snapshot: XidSnapshot, seen: Sequence[TimelineEntryRow]
    ) -> tuple[list[TimelineEntryRow], bool]:
        """Of ``seen`` (this run's entries after the cursor, read in ``snapshot``, in id order), those
        that can be handed on now, and whether none is held back; advances the cursor past them."""
        newest = seen[-1].id if seen else self.cursor
        upto = self.cursor
        resolved = self._held is None or snapshot.ended(self._held[1])
        if self._held is not None and resolved:
            upto = self._held[0]
        if not snapshot.in_progress:
            upto = newest
        if resolved or upto >= newest:
            self._held = (newest, snapshot.in_progress) if newest > upto else None
        entries = [entry for entry in seen if entry.id <= upto]
        self.cursor = max(self.cursor, upto)
        return entries, self._held is None


async def poll_tails(engine: AsyncEngine, tails: Sequence[TimelineTail]) -> list[TailPoll]:
    """One poll of many runs' tails (each a distinct run), in three statements whatever their number:
    the runs, then their new entries with the snapshot they were read in (a run seen ended so has
    no entry of its end left unread), then the findings the entries name."""
    uids = [tail.uid for tail in tails]
    async with engine.connect() as plain:
        conn = await plain.execution_options(isolation_level="AUTOCOMMIT")
        runs = {
            row.uid: Run(**row._mapping)
            for row in await conn.execute(select(*LISTED).where(Run.uid.in_(uids)))
        }
        rows = (await conn.execute(_NEWS, {"uids": uids, "cursors": [tail.cursor for tail in tails]})).all()
        snapshot = XidSnapshot.parse(rows[0].snapshot)
        snapshot = dataclasses.replace(snapshot, in_progress=frozenset(int(x) for x in rows[0].writers))
        columns = [c.name for c in TimelineEntryRow.__table__.columns]
        seen: dict[str, list[TimelineEntryRow]] = {}
        for row in rows:
            if row.id is not None:
                seen.setdefault(row.run_uid, []).append(
                    TimelineEntryRow(**{c: row._mapping[c] for c in columns})
                )
        absorbed = [tail.absorb(snapshot, seen.get(tail.uid, [])) for tail in tails]
        named = {
            str(e.detail.get("finding"))
            for entries, _ in absorbed
            for e in entries
            if e.source == "finding" and e.detail
        }
        findings: dict[str, FindingRow] = {}
        if named:
            found = await conn.execute(select(FindingRow).where(FindingRow.id.in_(sorted(named))))
            findings = {row.id: FindingRow(**row._mapping) for row in found}
    return [
        TailPoll(
            runs.get(tail.uid),
            entries,
            {f: findings[f] for e in entries if (f := str((e.detail or {}).get("finding"))) in findings},
            settled,
        )
        for tail, (entries, settled) in zip(tails, absorbed, strict=True)
    ]


async def firing_findings(conn: AsyncConnection, uids: Sequence[str]) -> dict[str, list[FindingRow]]:
    """Runs' firing findings, each run's most recently seen first; runs without any are absent."""
    rows = await conn.execute(
        select(FindingRow)
        .where(FindingRow.run_uid.in_(list(uids)), FindingRow.status == "firing")
        .order_by(FindingRow.last_seen.desc(), FindingRow.id)
    )
    firing: dict[str, list[FindingRow]] = {}
    for row in rows:
        firing.setdefault(row.run_uid, []).append(FindingRow(**row._mapping))
    return firing


def _attempts(namespace: str, name: str) -> Select[Run]:
    return select(Run).where(Run.namespace == namespace, Run.name == name)


async def newest_attempt(conn: AsyncConnection, namespace: str, name: str) -> Run | None:
    """The latest run of a job name (by creation), if any."""
    query = _attempts(namespace, name).order_by(Run.created_at.desc(), Run.uid.desc()).limit(1)
    row = (await conn.execute(query)).first()
    return Run(**row._mapping) if row else None


async def attempt(conn: AsyncConnection, namespace: str, name: str, number: int) -> Run | None:
    """Attempt ``number`` of a job name, if it has been seen."""
    query = _attempts(namespace, name).where(Run.attempt == number).order_by(Run.created_at).limit(1)
    row = (await conn.execute(query)).first()
    return Run(**row._mapping) if row else None


async def next_attempt(
    conn: AsyncConnection, namespace: str, name: str, after: tuple[datetime, str] | None
) -> Run | None:
    """The first run of a job name created after ``after`` (``(created_at, uid)``; None: the first)."""
    query = _attempts(namespace, name)
    if after is not None:
        query = query.where(
            (Run.created_at > after[0]) | ((Run.created_at == after[0]) & (Run.uid > after[1]))
        )
    row = (await conn.execute(query.order_by(Run.created_at, Run.uid).limit(1))).first()
    return Run(**row._mapping) if row else None
