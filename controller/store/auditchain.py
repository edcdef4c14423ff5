"""The audit table: hash-chained appends, verification, the audited purge, and the queries on it.

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
exactly that — so :func:`verify` can start from the purge point.

**Verification** (:func:`verify`) walks the chain in one snapshot and names the first record
where it breaks: a changed record (hash mismatch), a removed one (seq gap or a prev_hash that
does not match), a column that no longer says what the hashed record says, or a missing
prefix no purge record accounts for. The chain is evidence against quiet edits in the
database; whoever can rewrite every later hash can forge it, which is what the copies the
exporters ship to the SIEM (with ``seq`` and ``hash``) are for.
"""

from __future__ import annotations

import contextlib
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
from controller.store.models import AuditExportCursor, AuditRow

__all__ = [
    "CHAIN_LOCK",
    "GENESIS",
    "AuditFilter",
    "Break",
    "ChainHead",
    "Comparison",
    "PurgeResult",
    "StoredRecord",
    "Verification",
    "append",
    "canonical_json",
    "chain_hash",
    "chain_head",
    "claim_cursor",
    "compare_with_export",
    "export_cursors",
    "list_records",
    "move_cursor",
    "pages",
    "purge",
    "records_after",
    "verify",
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


def _columns(record: AuditRecord) -> dict[str, Any]:
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
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": CHAIN_LOCK})


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
                **_columns(record),
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


@dataclass(frozen=True)
class Break:
    """Where the chain breaks, and why."""

    seq: int
    reason: str


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify`."""

    checked: int
    first_seq: int | None
    last_seq: int | None
    head_hash: str | None
    anchor: str
    """What the first record's prev_hash was checked against: ``genesis`` or ``purge record <seq>``."""
    broken: Break | None = None

    @property
    def ok(self) -> bool:
        return self.broken is None

    def describe(self) -> str:
        """One line for people: what was checked, and where the chain breaks if it does."""
        if self.broken is not None:
            return (
                f"BROKEN at seq {self.broken.seq}: {self.broken.reason} "
                f"({self.checked} records checked before it)"
            )
        if not self.checked:
            return "the audit chain is empty"
        return (
            f"ok: {self.checked} records, seq {self.first_seq} to {self.last_seq}, "
            f"anchored at {self.anchor}; head {self.head_hash}"
        )


async def _anchor(conn: AsyncConnection, first: Any) -> tuple[str, str] | Break:
    """The prev_hash the first remaining record must carry, and where that expectation comes from."""
    if first.seq == 1:
        return GENESIS, "genesis"
    stated = (
        await conn.execute(
            select(AuditRow.seq, AuditRow.record)
            .where(AuditRow.verb == "purge")
            .where(AuditRow.record["purge"]["last_seq"].as_integer() == first.seq - 1)
            .order_by(AuditRow.seq.desc())
            .limit(1)
        )
    ).first()
    if stated is None:
        return Break(
            first.seq,
            f"records 1 to {first.seq - 1} are missing and no purge record accounts for them",
        )
    return str(stated.record["purge"]["last_removed_hash"]), f"purge record {stated.seq}"


def _check(row: Any, expected_prev: str, previous_seq: int | None) -> str | None:
    """Why ``row`` breaks the chain, or None."""
    if previous_seq is not None and row.seq != previous_seq + 1:
        return f"records {previous_seq + 1} to {row.seq - 1} are missing (seq jumps from {previous_seq})"
    if row.prev_hash != expected_prev:
        return (
            f"prev_hash {row.prev_hash[:12]}… does not match {expected_prev[:12]}…, the hash of the record "
            "before it (that record or this one was changed, or one was removed)"
        )
    if chain_hash(row.seq, row.prev_hash, row.recorded_at, row.record) != row.hash:
        return "the record does not match its hash: it was changed after it was written"
    try:
        expected = _columns(AuditRecord.model_validate(row.record))
    except ValueError as exc:
        return f"the hashed record is not a valid audit record: {exc}"
    for column, value in expected.items():
        if getattr(row, column) != value:
            return f"column {column} says {getattr(row, column)!r} but the hashed record says {value!r}"
    return None


async def verify(engine: AsyncEngine, page: int = 1000) -> Verification:
    """Walk the whole chain in one snapshot; the first broken link, if any, is in ``broken``."""
    async with engine.connect() as conn:
        snapshot = await conn.execution_options(isolation_level="REPEATABLE READ")
        async with snapshot.begin():
            return await _walk(snapshot, page)


async def _walk(conn: AsyncConnection, page: int) -> Verification:
    first = (await conn.execute(select(AuditRow).order_by(AuditRow.seq).limit(1))).first()
    if first is None:
        return Verification(0, None, None, None, "genesis")
    anchored = await _anchor(conn, first)
    if isinstance(anchored, Break):
        return Verification(0, first.seq, None, None, "none", anchored)
    expected_prev, anchor = anchored
    checked, previous_seq = 0, None
    while True:
        query = select(AuditRow).order_by(AuditRow.seq).limit(page)
        if previous_seq is not None:
            query = query.where(AuditRow.seq > previous_seq)
        rows = (await conn.execute(query)).all()
        for row in rows:
            reason = _check(row, expected_prev, previous_seq)
            if reason is not None:
                return Verification(
                    checked, first.seq, previous_seq, expected_prev, anchor, Break(row.seq, reason)
                )
            checked, previous_seq, expected_prev = checked + 1, row.seq, row.hash
        if len(rows) < page:
            return Verification(checked, first.seq, previous_seq, expected_prev, anchor)


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
    for column, value in (
        (AuditRow.namespace, where.namespace),
        (AuditRow.verb, where.verb),
        (AuditRow.username, where.username),
        (AuditRow.object_uid, where.object_uid),
    ):
        if value is not None:
            query = query.where(column == value)
    if where.namespaces is not None:
        query = query.where(AuditRow.namespace.in_(sorted(where.namespaces)))
    if where.since is not None:
        query = query.where(AuditRow.at >= where.since)
    if where.until is not None:
        query = query.where(AuditRow.at < where.until)
    return query


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


# ------------------------------------------------------------------- against the SIEM's copy


@dataclass(frozen=True)
class Comparison:
    """What a SIEM's JSON Lines export says that the database no longer does (:func:`compare_with_export`)."""

    lines: int
    missing: list[int] = field(default_factory=list)
    """Seqs the SIEM received that the database no longer has and no purge record accounts for."""
    changed: list[int] = field(default_factory=list)
    """Seqs whose hash in the database differs from the one the SIEM received."""
    head: ChainHead | None = None
    """The furthest chain head the SIEM was told about."""
    head_problem: str | None = None
    unreadable: list[int] = field(default_factory=list)
    """Line numbers (1-based) that are not exported audit links (a seq beyond BIGINT included)."""
    unverified: list[int] = field(default_factory=list)
    """Seqs the SIEM received that are gone, accounted for only by purge records it has not received."""
    unconfirmed_purges: list[int] = field(default_factory=list)
    """Seqs of the purge records the database holds and the SIEM's copy does not (yet)."""

    @property
    def ok(self) -> bool:
        return not (self.missing or self.changed or self.head_problem or self.unreadable or self.unverified)

    def describe(self) -> str:
        if self.ok:
            reached = f"; chain head seen by the SIEM: seq {self.head.seq}" if self.head else ""
            return f"ok: the database still has all {self.lines} records of the export{reached}"
        parts = []
        if self.missing:
            parts.append(
                f"{len(self.missing)} records the SIEM received are gone from the database: "
                f"seq {_ranges(self.missing)}"
            )
        if self.changed:
            parts.append(
                f"{len(self.changed)} records differ from what the SIEM received: seq {_ranges(self.changed)}"
            )
        if self.unverified:
            parts.append(
                f"{len(self.unverified)} records the SIEM received are gone and accounted for only by "
                f"purge record seq {_ranges(self.unconfirmed_purges)}, which the SIEM has not received: "
                "unverified (a retention purge and a cut look alike until it has): "
                f"seq {_ranges(self.unverified)}"
            )
        if self.head_problem:
            parts.append(self.head_problem)
        if self.unreadable:
            parts.append(
                f"{len(self.unreadable)} lines are not exported audit records: "
                f"line {_ranges(self.unreadable)}"
            )
        return "MISMATCH with the export: " + "; ".join(parts)


def _ranges(numbers: Sequence[int], shown: int = 10) -> str:
    """``1-3, 7, 9-12`` for people, the first ``shown`` runs only."""
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    text_runs = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:shown]]
    return ", ".join(text_runs) + (" …" if len(runs) > shown else "")


async def compare_with_export(engine: AsyncEngine, lines: Sequence[bytes | str]) -> Comparison:
    """Compare a SIEM's JSON Lines copy of the chain (the ``jsonl`` sink's file, or the same lines
    from any SIEM) with the database: records the SIEM received that the database no longer has
    (and no purge record accounts for), records that changed, and whether the database still
    reaches the furthest chain head the exports carried.

    A purge record excuses a removed record only if the SIEM's copy has that purge record too (same
    hash) and it purged records before itself: whoever can write the table could otherwise cut the
    newest records and append a purge record "accounting" for them while the SIEM lags. Removed
    records covered only by purge records the SIEM lacks are reported as unverified.
    """
    shipped: dict[int, str] = {}
    unreadable: list[int] = []
    head: ChainHead | None = None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            link = json.loads(line)
            seq = _seq(link["seq"])
            seen = None
            if isinstance(link.get("head"), dict):
                seen = ChainHead(_seq(link["head"]["seq"]), str(link["head"]["hash"]))
            shipped[seq] = str(link["hash"])
            if seen is not None and (head is None or seen.seq > head.seq):
                head = seen
        except (ValueError, KeyError, TypeError):
            unreadable.append(number)
    wanted = set(shipped) | ({head.seq} if head else set())
    stored: dict[int, str] = {}
    purges: list[tuple[int, int, int]] = []  # (the purge record's seq, first and last seq it removed)
    async with engine.connect() as conn:
        snapshot = await conn.execution_options(isolation_level="REPEATABLE READ")
        async with snapshot.begin():
            ordered = sorted(wanted)
            for start in range(0, len(ordered), 5000):
                chunk = ordered[start : start + 5000]
                rows = await snapshot.execute(
                    select(AuditRow.seq, AuditRow.hash).where(AuditRow.seq.in_(chunk))
                )
                stored.update({seq: digest for seq, digest in rows})
            purge_rows = await snapshot.execute(
                select(AuditRow.seq, AuditRow.record).where(AuditRow.verb == "purge")
            )
            for purge_seq, record in purge_rows:
                summary = record.get("purge") or {}
                with contextlib.suppress(KeyError, TypeError, ValueError):
                    purges.append((purge_seq, int(summary["first_seq"]), int(summary["last_seq"])))
            newest = (await _head(snapshot))[0]
    purges = [(s, first, last) for s, first, last in purges if last < s]  # a purge removes records before it
    received = {s for s, _, _ in purges if s in stored and shipped.get(s) == stored[s]}

    def accounted(seq: int) -> bool:
        return any(first <= seq <= last for s, first, last in purges if s in received)

    def maybe_purged(seq: int) -> list[int]:
        return [s for s, first, last in purges if s not in received and first <= seq <= last]

    gone = [seq for seq in sorted(shipped) if seq not in stored and not accounted(seq)]
    missing = [seq for seq in gone if not maybe_purged(seq)]
    unverified = [seq for seq in gone if maybe_purged(seq)]
    changed = [seq for seq in sorted(shipped) if seq in stored and stored[seq] != shipped[seq]]
    problem = None
    if head is not None:
        if head.seq not in stored and maybe_purged(head.seq):
            problem = (
                f"the chain head the SIEM was told (seq {head.seq}) is gone, accounted for only by purge "
                f"record seq {_ranges(maybe_purged(head.seq))}, which the SIEM has not received: unverified"
            )
        elif head.seq not in stored and not accounted(head.seq):
            problem = (
                f"the SIEM was told the chain reached seq {head.seq}, "
                f"but the database ends at seq {newest}: the newest records were removed"
            )
        elif head.seq in stored and stored[head.seq] != head.hash:
            problem = (
                f"the chain head the SIEM was told (seq {head.seq}) has a different hash in the database"
            )
    return Comparison(
        lines=sum(1 for line in lines if line.strip()),
        missing=missing,
        changed=changed,
        head=head,
        head_problem=problem,
        unreadable=unreadable,
        unverified=unverified,
        unconfirmed_purges=sorted({s for seq in unverified for s in maybe_purged(seq)}),
    )


_MAX_SEQ = 2**63 - 1
"""The largest seq a BIGINT column holds."""


def _seq(value: Any) -> int:
    """A seq from an export line; ValueError for one no chain can have (a BIGINT holds it)."""
    seq = int(value)
    if not 1 <= seq <= _MAX_SEQ:
        raise ValueError(f"seq {seq} is outside 1 to {_MAX_SEQ}")
    return seq
