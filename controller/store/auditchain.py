"""The audit table: hash-chained appends, the audited purge, and the queries on it.

**One global chain.** Every record gets the next ``seq`` (1, 2, 3, … without gaps) and
``hash = sha256(canonical JSON of {seq, prev_hash, recorded_at, record})`` where ``prev_hash``
is the hash of record ``seq - 1`` (64 zeros for record 1). Canonical JSON is UTF-8 with
sorted keys and no insignificant whitespace; ``recorded_at`` is ISO 8601 in UTC with
microseconds. A global chain (rather than one per namespace) makes removing a whole
namespace's records, or reordering across namespaces, as visible as any other change.

**Appends are serialized** by a transaction-level advisory lock (:data:`CHAIN_LOCK`), so
several consumer replicas and the purge can write without forking the chain; the lock is
released at commit, when the next writer can read the new head.

**Append-only.** The runtime role may only SELECT and INSERT (migration 0007; migrations run
as a separate owner role), and a trigger refuses UPDATE, DELETE and TRUNCATE even to the owner
(migration 0004). The only way out is :func:`purge`, which calls the owner's ``SECURITY
DEFINER`` function ``audit_purge``: in one transaction it removes the oldest records (a prefix
of the chain recorded before a cutoff at least a day ago) and appends the ``purge`` record
naming what it removed and the hash of the last removed record — after checking the record says
exactly that — so :func:`~controller.store.auditverification.verify` can start
from the purge point.

**Verification** of the chain and the comparison with a SIEM's copy of it read what this module
wrote, and are :mod:`controller.store.auditverification`.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Select, func, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from controller.contract.audit import Actor, AuditRecord, PurgeSummary
from controller.store.engine import lock_transaction
from controller.store.filters import matching, within
from controller.store.models import AuditExportCursor, AuditRow

__all__ = [
    "CHAIN_LOCK",
    "GENESIS",
    "AuditFilter",
    "ChainHead",
    "PurgeResult",
    "StoredRecord",
    "append",
    "canonical_json",
    "chain_hash",
    "chain_head",
    "claim_cursor",
    "export_cursors",
    "list_records",
    "move_cursor",
    "pages",
    "purge",
    "record_columns",
    "records_after",
]

GENESIS = "0" * 64
"""The ``prev_hash`` of record 1."""
CHAIN_LOCK = 0x6D706A6361756474
"""``pg_advisory_xact_lock`` key that serializes appends ("mpjcaudt")."""
PURGE_FLAG = "mpijc.audit_purge"
"""Transaction-local setting that lets the trigger pass the purge's DELETE (set by ``audit_purge``)."""


def canonical_json(value: Any) -> bytes:
    """UTF-8 JSON with sorted keys and no insignificant whitespace: what the chain hashes."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def instant(at: datetime) -> str:
    """An aware datetime as ISO 8601 in UTC with microseconds, the one spelling the chain uses."""
    if at.tzinfo is None:
        raise ValueError(f"{at!r} has no timezone")
    return at.astimezone(UTC).isoformat(timespec="microseconds")


def chain_hash(seq: int, prev_hash: str, recorded_at: datetime, record: Mapping[str, Any]) -> str:
    """The hash of one chain link: sha256 over the canonical JSON of the link without its hash."""
    body = {"seq": seq, "prev_hash": prev_hash, "recorded_at": instant(recorded_at), "record": record}
    return hashlib.sha256(canonical_json(body)).hexdigest()


@dataclass(frozen=True)
class StoredRecord:
    """One link of the chain: the record and where it sits."""

    seq: int
    recorded_at: datetime
    prev_hash: str
    hash: str
    raw: Mapping[str, Any] = field(repr=False)
    """The record exactly as stored and hashed."""

    @functools.cached_property
    def record(self) -> AuditRecord:
        """The record parsed (once)."""
        return AuditRecord.model_validate(self.raw)

    def export(self) -> dict[str, Any]:
        """The link as exported: drop ``hash``, hash the canonical JSON of the rest, and it must match."""
        return {
            "seq": self.seq,
            "recorded_at": instant(self.recorded_at),
            "prev_hash": self.prev_hash,
            "hash": self.hash,
            "record": dict(self.raw),
        }


@dataclass(frozen=True)
class ChainHead:
    """The newest link when a batch was exported: shipped with it, so the SIEM holds a checkpoint
    of how far the chain reached, and removing the newest records is visible against it."""

    seq: int
    hash: str

    def export(self) -> dict[str, Any]:
        return {"seq": self.seq, "hash": self.hash}


async def chain_head(conn: AsyncConnection) -> ChainHead | None:
    """The newest link; None while the chain is empty."""
    seq, digest = await _head(conn)
    return ChainHead(seq, digest) if seq else None


def record_columns(record: AuditRecord) -> dict[str, Any]:
    """The filter columns, copied from the record (and checked against it by :func:`verify`)."""
    return {
        "event_id": record.id,
        "at": record.at,
        "namespace": record.namespace,
        "source": record.source,
        "verb": record.verb,
        "kind": record.object.kind if record.object else None,
        "name": record.object.name if record.object else None,
        "object_uid": record.object.uid if record.object else None,
        "username": record.actor.username if record.actor else None,
    }


def _stored(row: Any) -> StoredRecord:
    return StoredRecord(row.seq, row.recorded_at, row.prev_hash, row.hash, row.record)


async def _head(conn: AsyncConnection) -> tuple[int, str]:
    """The newest link's seq and hash; the genesis when the chain is empty."""
    query = select(AuditRow.seq, AuditRow.hash).order_by(AuditRow.seq.desc()).limit(1)
    row = (await conn.execute(query)).first()
    return (row.seq, row.hash) if row else (0, GENESIS)


async def _lock_chain(conn: AsyncConnection) -> None:
    await lock_transaction(conn, CHAIN_LOCK)


async def append(
    conn: AsyncConnection,
    records: Sequence[AuditRecord],
    now: datetime,
    *,
    head: tuple[int, str] | None = None,
) -> list[StoredRecord]:
    """Chain and insert the records whose id is not stored yet, in order; returns what was appended.

    Call inside a transaction: the chain stays locked until it commits. ``head`` (seq, hash)
    is the link to continue from, for the purge, which has just removed it; by default the
    newest stored record (or the genesis when there is none).
    """
    fresh: dict[str, AuditRecord] = {}
    for record in records:
        fresh.setdefault(record.id, record)
    if not fresh:
        return []
    await _lock_chain(conn)
    known = set(
        (await conn.execute(select(AuditRow.event_id).where(AuditRow.event_id.in_(list(fresh))))).scalars()
    )
    seq, prev = head or await _head(conn)
    appended: list[StoredRecord] = []
    rows: list[dict[str, Any]] = []
    for record in fresh.values():
        if record.id in known:
            continue
        seq += 1
        raw = record.model_dump(mode="json")
        link = StoredRecord(seq, now, prev, chain_hash(seq, prev, now, raw), raw)
        appended.append(link)
        rows.append(
            {
                **record_columns(record),
                "seq": seq,
                "recorded_at": now,
                "record": raw,
                "prev_hash": prev,
                "hash": link.hash,
            }
        )
        prev = link.hash
    if rows:
        await conn.execute(insert(AuditRow), rows)
    return appended


# ------------------------------------------------------------------------------- verification


# ------------------------------------------------------------------------------------ purge


@dataclass(frozen=True)
class PurgeResult:
    """What :func:`purge` did."""

    removed: int
    record: StoredRecord | None
    """The purge record appended to the chain (None when nothing was due)."""
    held_back_by: dict[str, int] = field(default_factory=dict)
    """Sinks whose cursor (last seq shipped) kept due records from being removed."""


async def purge(
    conn: AsyncConnection,
    retention_days: int,
    actor: Actor,
    now: datetime,
    *,
    respect_cursors: bool = True,
) -> PurgeResult:
    """Remove records recorded more than ``retention_days`` ago, and record that in the chain.

    Only a prefix of the chain is removed (up to the first record still to be kept), and,
    unless ``respect_cursors`` is off, nothing an exporter has not shipped yet. Call inside a
    transaction: the delete and the purge record commit together or not at all.
    """
    if retention_days < 1:
        raise ValueError("retention_days must be at least 1")
    await _lock_chain(conn)
    before = now - timedelta(days=retention_days)
    first_kept = (
        await conn.execute(select(func.min(AuditRow.seq)).where(AuditRow.recorded_at >= before))
    ).scalar_one()
    upto = (
        first_kept - 1
        if first_kept is not None
        else (await conn.execute(select(func.max(AuditRow.seq)))).scalar_one() or 0
    )
    held_back: dict[str, int] = {}
    if respect_cursors:
        held_back = {sink: seq for sink, seq in (await export_cursors(conn)).items() if seq < upto}
        upto = min([upto, *held_back.values()])
    due = (
        await conn.execute(
            select(
                func.count(),
                func.min(AuditRow.seq),
                func.max(AuditRow.seq),
                func.min(AuditRow.recorded_at),
                func.max(AuditRow.recorded_at),
            ).where(AuditRow.seq <= upto)
        )
    ).one()
    removed, first_seq, last_seq, oldest, newest = due
    if not removed:
        return PurgeResult(0, None, held_back)
    last_hash = (await conn.execute(select(AuditRow.hash).where(AuditRow.seq == last_seq))).scalar_one()
    head_seq, head_hash = await _head(conn)  # the purge may remove every record: the chain goes on from here
    summary = PurgeSummary(
        retention_days=retention_days,
        before=before,
        removed=removed,
        first_seq=first_seq,
        last_seq=last_seq,
        last_removed_hash=last_hash,
        oldest_recorded_at=oldest,
        newest_recorded_at=newest,
    )
    record = AuditRecord(
        id=f"purge/{first_seq}-{last_seq}",
        source="retention",
        verb="purge",
        at=now,
        namespace=None,
        actor=actor,
        outcome="removed",
        message=f"removed {removed} records (seq {first_seq} to {last_seq}) "
        f"recorded before {instant(before)}",
        purge=summary,
    )
    raw = record.model_dump(mode="json")
    seq = head_seq + 1
    appended = StoredRecord(seq, now, head_hash, chain_hash(seq, head_hash, now, raw), raw)
    # The owner's SECURITY DEFINER function deletes and appends: the runtime role has no DELETE.
    stored = (
        await conn.execute(
            text("SELECT audit_purge(:before, :upto, :recorded_at, CAST(:record AS jsonb), :hash)"),
            {
                "before": before,
                "upto": upto,
                "recorded_at": now,
                "record": json.dumps(raw),
                "hash": appended.hash,
            },
        )
    ).scalar_one()
    if stored != seq:  # pragma: no cover - the chain lock makes this impossible
        raise RuntimeError(f"audit_purge appended seq {stored}, expected {seq}")
    return PurgeResult(removed, appended, held_back)


# ---------------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class AuditFilter:
    """Filters of audit queries; ``None`` means any. ``namespaces`` is what the caller may see."""

    namespace: str | None = None
    namespaces: frozenset[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    verb: str | None = None
    username: str | None = None
    object_uid: str | None = None


def _filtered(query: Select[tuple[AuditRow]], where: AuditFilter) -> Select[tuple[AuditRow]]:
    query = matching(
        query,
        (
            (AuditRow.namespace, where.namespace),
            (AuditRow.verb, where.verb),
            (AuditRow.username, where.username),
            (AuditRow.object_uid, where.object_uid),
        ),
    )
    if where.namespaces is not None:
        query = query.where(AuditRow.namespace.in_(sorted(where.namespaces)))
    return within(query, AuditRow.at, where.since, where.until)


async def list_records(
    conn: AsyncConnection, where: AuditFilter, limit: int, before_seq: int | None = None
) -> list[StoredRecord]:
    """Records newest first (by chain position); ``before_seq`` continues after the last one seen."""
    query = _filtered(select(AuditRow), where)
    if before_seq is not None:
        query = query.where(AuditRow.seq < before_seq)
    rows = await conn.execute(query.order_by(AuditRow.seq.desc()).limit(limit))
    return [_stored(row) for row in rows]


async def records_after(
    conn: AsyncConnection, after_seq: int, limit: int, where: AuditFilter | None = None
) -> list[StoredRecord]:
    """Records in chain order after ``after_seq``: what an export ships next."""
    query = _filtered(select(AuditRow), where or AuditFilter()).where(AuditRow.seq > after_seq)
    rows = await conn.execute(query.order_by(AuditRow.seq).limit(limit))
    return [_stored(row) for row in rows]


async def pages(
    engine: AsyncEngine, where: AuditFilter, size: int = 500
) -> AsyncIterator[list[StoredRecord]]:
    """Every matching record in chain order, a page at a time, each page read on its own connection.

    For streaming exports: no connection is held while a page is being sent.
    """
    after = 0
    while True:
        async with engine.connect() as conn:
            page = await records_after(conn, after, size, where)
        if not page:
            return
        yield page
        after = page[-1].seq


# ---------------------------------------------------------------------------- export cursors


async def claim_cursor(conn: AsyncConnection, sink: str) -> int | None:
    """Lock ``sink``'s cursor for this transaction and return its last shipped seq.

    None when another exporter holds it (``SKIP LOCKED``): one exporter per sink at a time.
    """
    await conn.execute(
        insert(AuditExportCursor)
        .values(sink=sink, last_seq=0, exported=0, updated_at=func.now())
        .on_conflict_do_nothing(index_elements=["sink"])
    )
    held: int | None = (
        await conn.execute(
            select(AuditExportCursor.last_seq)
            .where(AuditExportCursor.sink == sink)
            .with_for_update(skip_locked=True)
        )
    ).scalar_one_or_none()
    return held


async def move_cursor(conn: AsyncConnection, sink: str, last_seq: int, shipped: int, now: datetime) -> None:
    """Record that ``sink`` has everything up to ``last_seq`` (``shipped`` more records than before)."""
    await conn.execute(
        update(AuditExportCursor)
        .where(AuditExportCursor.sink == sink)
        .values(
            last_seq=last_seq,
            exported=AuditExportCursor.exported + shipped,
            updated_at=now,
        )
    )


async def export_cursors(conn: AsyncConnection) -> dict[str, int]:
    """Every sink's cursor: the last seq it shipped."""
    rows = await conn.execute(select(AuditExportCursor.sink, AuditExportCursor.last_seq))
    return {sink: last_seq for sink, last_seq in rows}
