"""Corroboration of admission records: does the watch stream show the change a record claims?

A record the admission webhook took from a caller without a client certificate
(``caller: unverified``) could have been sent by anyone who reached the webhook. It is kept
in the chain as it came, and judged here, once:

- the audit consumer stores every job change the watch stream shows (:func:`record_changes`,
  table ``watch_changes``);
- :func:`decide` (run periodically) marks a pending record ``verified`` as soon as a change
  of the same object (namespace, kind, name) with the matching operation (create ↔ ``ADDED``,
  update ↔ ``MODIFIED``, delete ↔ ``DELETED``) was observed within ``window`` of it, and
  ``unmatched`` once ``window`` has passed without one. Either order of arrival works, and
  since the verdict is an ``INSERT … ON CONFLICT DO NOTHING`` keyed by the record, replicas
  deciding at once agree on one verdict.

Verdicts live in ``admission_corroborations``: the audit chain is never updated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.contract.events import JobObserved

__all__ = ["Verdict", "decide", "pending", "record_changes", "verdicts"]

KEEP_CHANGES = timedelta(days=1)
"""How long observed job changes are kept to match admission records against."""

_DECIDE = text(
    """
    WITH candidates AS (
        SELECT a.seq, a.at, (
            SELECT min(w.observed_at) FROM watch_changes w
            WHERE w.namespace = a.namespace AND w.kind = a.kind AND w.name = a.name
              AND w.change = CASE a.verb WHEN 'create' THEN 'ADDED' WHEN 'update' THEN 'MODIFIED'
                                         WHEN 'delete' THEN 'DELETED' END
              AND w.observed_at BETWEEN a.at - CAST(:window AS interval) AND a.at + CAST(:window AS interval)
        ) AS seen
        FROM audit_records a
        WHERE a.source = 'admission' AND a.record->>'caller' = 'unverified'
          AND NOT EXISTS (SELECT 1 FROM admission_corroborations c WHERE c.audit_seq = a.seq)
    )
    INSERT INTO admission_corroborations (audit_seq, status, observed_at, decided_at)
    SELECT seq, CASE WHEN seen IS NULL THEN 'unmatched' ELSE 'verified' END, seen, CAST(:now AS timestamptz)
    FROM candidates WHERE seen IS NOT NULL OR at < CAST(:now AS timestamptz) - CAST(:window AS interval)
    ON CONFLICT (audit_seq) DO NOTHING
    RETURNING audit_seq, status
    """
)
_RECORD = text(
    "INSERT INTO watch_changes (uid, resource_version, change, namespace, kind, name, observed_at) "
    "VALUES (:uid, :resource_version, :change, :namespace, :kind, :name, :observed_at) ON CONFLICT DO NOTHING"
)
_FORGET = text("DELETE FROM watch_changes WHERE observed_at < :cutoff")
_VERDICTS = text(
    "SELECT audit_seq, status, observed_at FROM admission_corroborations WHERE audit_seq = ANY(:seqs)"
)
_PENDING = text(
    """
    SELECT count(*) FROM audit_records a
    WHERE a.source = 'admission' AND a.record->>'caller' = 'unverified'
      AND NOT EXISTS (SELECT 1 FROM admission_corroborations c WHERE c.audit_seq = a.seq)
    """
)


@dataclass(frozen=True)
class Verdict:
    """What was decided about one admission record."""

    status: str
    """``verified`` or ``unmatched``."""
    observed_at: datetime | None
    """When the watch saw the change (``verified`` only)."""


async def record_changes(conn: AsyncConnection, events: Iterable[JobObserved]) -> int:
    """Keep the job changes of ``events`` to match admission records against; returns how many."""
    rows = [
        {
            "uid": e.uid,
            "resource_version": e.resource_version,
            "change": e.change,
            "namespace": e.namespace,
            "kind": e.kind,
            "name": e.name,
            "observed_at": e.observed_at,
        }
        for e in events
    ]
    if rows:
        await conn.execute(
            _RECORD,
            rows,
        )
    return len(rows)


async def decide(conn: AsyncConnection, now: datetime, window: timedelta) -> Counter[str]:
    """Judge what can be judged now; returns how many records got each verdict. Old changes go."""
    decided = Counter(status for _, status in await conn.execute(_DECIDE, {"now": now, "window": window}))
    await conn.execute(
        text("DELETE FROM watch_changes WHERE observed_at < :cutoff"), {"cutoff": now - KEEP_CHANGES}
    )
    return decided


async def pending(conn: AsyncConnection) -> int:
    """Unverified admission records without a verdict yet."""
    return int((await conn.execute(_PENDING)).scalar_one())


async def verdicts(conn: AsyncConnection, seqs: Sequence[int]) -> dict[int, Verdict]:
    """The verdicts on the records ``seqs`` that have one."""
    if not seqs:
        return {}
    rows = await conn.execute(
        text(
            "SELECT audit_seq, status, observed_at FROM admission_corroborations WHERE audit_seq = ANY(:seqs)"
        ),
        {"seqs": list(seqs)},
    )
    return {seq: Verdict(status, observed_at) for seq, status, observed_at in rows}
