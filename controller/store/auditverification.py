"""Reading the audit chain back: :func:`verify` walks it, :func:`compare_with_export` holds it
against a SIEM's copy.

**Verification** (:func:`verify`) walks the chain (:mod:`controller.store.auditchain` writes it)
in one snapshot and names the first record where it breaks: a changed record (hash mismatch), a
removed one (seq gap or a prev_hash that does not match), a column that no longer says what the
hashed record says, or a missing prefix no purge record accounts for. The chain is evidence
against quiet edits in the database; whoever can rewrite every later hash can forge it, which is
what the copies the exporters ship to the SIEM (with ``seq`` and ``hash``) are for, and what
:func:`compare_with_export` reads.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from controller.contract.audit import AuditRecord
from controller.store.auditchain import GENESIS, ChainHead, chain_hash, chain_head, record_columns
from controller.store.models import AuditRow

__all__ = ["Break", "ExportComparison", "Verification", "compare_with_export", "verify"]


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
        expected = record_columns(AuditRecord.model_validate(row.record))
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


# ------------------------------------------------------------------- against the SIEM's copy


@dataclass(frozen=True)
class ExportComparison:
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


async def compare_with_export(engine: AsyncEngine, lines: Sequence[bytes | str]) -> ExportComparison:
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
            reached = await chain_head(snapshot)
            newest = reached.seq if reached else 0
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
    return ExportComparison(
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
