"""Corroboration of admission records: did the watch stream see the change a record claims?

Anyone who reaches the admission webhook without the API server's client certificate
(``caller: unverified``), and anyone who can publish on ``audit.>``, can put an admission record
into the chain. It is kept as it came, and judged here, once, whatever its ``caller``:

- the audit consumer keeps every job version the watch stream shows (:func:`record_changes`,
  table ``watch_changes``): uid, resourceVersion, generation, creation time, spec summary and labels;
- :func:`decide` (run periodically, one decider at a time under an advisory lock) compares each
  record without a verdict with the versions of **the object uid it names** (and the same
  namespace, kind and name) seen within ``window`` of it:

  - ``create`` — the object was created (``creationTimestamp``) within the window;
  - ``delete`` — the watch saw that uid ``DELETED`` within the window;
  - ``update`` — a version within the window differs from the one before it the way the record
    says (:func:`controller.store.claims.judge_update`: spec or not, summary fields, labels);

  and one watched change bears out **one** record: ``<uid>/create``, ``<uid>/delete`` or
  ``<uid>/<resourceVersion>`` is stored as the verdict's ``claim``, unique. Records from the API
  server's certificate (``caller: mtls``) are judged first, then the rest in chain order.

Who holds a change is not first come, first served: a record posted *before* the change it
claims (a forgery that names a change someone is about to make) would otherwise take it, and the
genuine record would be ``unmatched``. When a record, once due, claims a change another record
holds:

- a record from the API server's certificate takes the change from a holder without it: it is
  ``verified``, the holder's verdict becomes ``unmatched`` (naming it as the rival);
- against an ``mtls`` holder, it is ``unmatched`` (naming the holder), as before;
- between two records without the API server's certificate, neither can be believed over the
  other: both are ``disputed``, each naming the other (the holder keeps the claim, so a third
  claimant is disputed too). The contradiction is shown; no forgery is ``verified``.

Verdicts stay append-only (the runtime role may add them, not change them): the later record's
row names the holder (``rival``), and :func:`verdicts` reads the holder's ``verified`` through it
as ``disputed`` or ``unmatched``. So a record's verdict can change once after it was first read:
an exporter that shipped it ``verified`` ships the later record with the dispute, naming the
earlier record's seq.

Verdicts: ``verified`` as soon as a matching change is seen; once ``window`` has passed since
the record (its ``at``, or when it was chained if that is earlier) without one, ``contradicted``
(the watch saw the object change, differently), ``unobservable`` (it saw the object change, but
the record claims only what the watch does not carry, or the change cannot be compared),
``unmatched`` (nothing, or only a change an authenticated record holds) or ``disputed`` (another
record without the API server's certificate claims the same change). ``unjudged`` marks records
chained before every record was judged (migration 0010). Verdicts live in
``admission_corroborations``; the audit chain is never updated.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Select, func, select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.orm import QueryableAttribute

from controller.contract.audit import AuditRecord
from controller.contract.events import JobObserved
from controller.contract.kubeflow import comparable
from controller.contract.redaction import clean_controls
from controller.store.claims import ClaimOutcome, Seen, judge_update
from controller.store.engine import lock_transaction
from controller.store.models import AdmissionCorroboration, AuditRow, WatchChangeRow

__all__ = ["CorroborationVerdict", "Decision", "decide", "pending", "record_changes", "settled", "verdicts"]

KEEP_CHANGES = timedelta(days=1)
"""How long job versions are kept to judge records against (the newest of a live job: always)."""
BATCH = 1000
"""Records judged per :func:`decide`, oldest first (mTLS ones before the others)."""
DECIDE_LOCK = 0x6D706A63636F7272
"""Advisory lock key (``mpjccorr``): one decider at a time, so verdicts and claims never race."""
MAX_DETAIL = 500

_PENDING = (
    select(AuditRow.seq, AuditRow.recorded_at, AuditRow.record)
    .where(AuditRow.source == "admission")
    .where(
        ~select(AdmissionCorroboration.audit_seq)
        .where(AdmissionCorroboration.audit_seq == AuditRow.seq)
        .exists()
    )
)
_CUSTOM_PLANS = text("SET LOCAL plan_cache_mode = force_custom_plan")
"""``seq > :after`` is a range scan for a recent seq and the whole table for 0: after a few rounds
a prepared statement's generic plan would scan the whole table every round."""
_PRUNE = text(
    """
    DELETE FROM watch_changes w WHERE w.observed_at < :cutoff
      AND (w.change = 'DELETED' OR EXISTS (
        SELECT 1 FROM watch_changes n WHERE n.uid = w.uid AND n.observed_at > w.observed_at))
    """
)


@dataclass(frozen=True)
class CorroborationVerdict:
    """What was decided about one admission record."""

    status: str
    """``verified``, ``contradicted``, ``unmatched``, ``unobservable`` or ``unjudged``."""
    observed_at: datetime | None
    """When the watch saw the change that bore it out (``verified``) or contradicted it."""
    detail: str | None = None
    """Why, in words."""


@dataclass(frozen=True)
class Decision:
    """A verdict :func:`decide` stored."""

    seq: int
    status: str
    caller: str | None
    detail: str
    rival: int | None = None
    """The other record that claims the same change (``unmatched`` and ``disputed``)."""
    revised: bool = False
    """A ``verified`` record of an earlier round whose verdict now reads otherwise (a rival took
    or disputed its change); nothing of its own row changes."""


@dataclass(frozen=True)
class _Version:
    """One row of ``watch_changes``."""

    uid: str
    resource_version: str
    change: str
    namespace: str
    kind: str
    name: str
    observed_at: datetime
    generation: int | None
    created_at: datetime | None
    spec: dict[str, Any] | None
    labels: dict[str, str] | None

    @property
    def comparable(self) -> bool:
        """A resourceVersion in KEP-5504's comparable form (a positive integer without leading
        zeros; stable in Kubernetes 1.35): the larger is the later change of the object."""
        return comparable(self.resource_version)

    def seen(self) -> Seen:
        return Seen(self.resource_version, self.generation, self.spec, self.labels)


_UNTOLD = (
    "which of them made it cannot be told from the records (neither came with the API server's certificate)"
)


def disputed_by(rival: int, resource_version: str | None) -> str:
    """Why a held change is disputed: record ``rival`` claims it too."""
    return f"record seq {rival} claims the same change (resourceVersion {resource_version}) too: {_UNTOLD}"


def displaced(rival: int, resource_version: str | None) -> str:
    """Why a held change is no longer borne out: record ``rival``, from the certificate, took it."""
    return (
        f"the change it claimed (resourceVersion {resource_version}) bore out record seq {rival}, "
        "from the API server's certificate"
    )


@dataclass(frozen=True)
class _Holder:
    """The record that holds a watched change (its verdict's ``claim``)."""

    seq: int
    caller: str | None
    status: str


async def record_changes(conn: AsyncConnection, events: Iterable[JobObserved]) -> int:
    """Keep the job versions of ``events`` to judge admission records against; returns how many."""
    rows = [
        {
            "uid": e.uid,
            "resource_version": e.resource_version,
            "change": e.change,
            "namespace": e.namespace,
            "kind": e.kind,
            "name": e.name,
            "observed_at": e.observed_at,
            "generation": e.generation,
            "created_at": e.created_at,
            "spec": e.spec.model_dump(mode="json"),
            "labels": dict(e.labels),
        }
        for e in events
    ]
    if rows:
        await conn.execute(insert(WatchChangeRow).on_conflict_do_nothing(), rows)
    return len(rows)


class _Round:
    """One :func:`decide`: what the watch saw of the objects in question, and whose claims are taken."""

    def __init__(
        self,
        versions: dict[str, list[_Version]],
        taken: dict[str, _Holder],
        now: datetime,
        window: timedelta,
    ) -> None:
        self.versions, self.taken, self.now, self.window = versions, taken, now, window
        self.rows: dict[int, dict[str, Any]] = {}
        """The ``admission_corroborations`` row of each decision, by seq."""
        self.decisions: dict[int, Decision] = {}
        """The decisions of this round, by seq, and the earlier verdicts it revises."""

    def ordered(self, uid: str) -> list[_Version]:
        """The versions of ``uid`` oldest first: by resourceVersion where every one is comparable
        (KEP-5504), else by when the watch saw them."""
        kept = self.versions[uid]
        if all(v.comparable for v in kept):
            return sorted(kept, key=lambda v: (len(v.resource_version), v.resource_version, v.change))
        return sorted(kept, key=lambda v: (v.observed_at, v.resource_version, v.change))

    def before(self, version: _Version) -> _Version | None:
        """The version the watch showed before ``version`` (another resourceVersion), if kept."""
        previous = None
        for v in self.ordered(version.uid):
            if v.resource_version == version.resource_version:
                return previous
            previous = v
        return previous

    def judge(self, seq: int, recorded_at: datetime, record: AuditRecord) -> Decision | None:
        """The verdict on one record, or None while it may still be borne out."""
        due = self.now > min(record.at, recorded_at) + self.window
        obj = record.object
        if obj is None or obj.uid is None:
            return (
                self._decide(seq, record.caller, "unmatched", "the record names no object uid")
                if due
                else None
            )
        ours = [
            v
            for v in self.versions.get(obj.uid, ())
            if (v.namespace, v.kind, v.name) == (record.namespace, obj.kind, obj.name)
        ]
        what = f"{obj.kind} {record.namespace}/{obj.name} (uid {obj.uid})"
        if record.verb in ("create", "delete"):
            return self._judge_once(seq, record, obj.uid, ours, due, what)
        if record.verb == "update":
            return self._judge_update(seq, record, obj.uid, ours, due, what)
        why = f"an admission record cannot claim {record.verb!r}: the webhook records create, update, delete"
        return self._decide(seq, record.caller, "unmatched", why) if due else None

    def _within(self, at: datetime | None, record: AuditRecord) -> bool:
        return at is not None and record.at - self.window <= at <= record.at + self.window

    def _judge_once(
        self, seq: int, record: AuditRecord, uid: str, ours: list[_Version], due: bool, what: str
    ) -> Decision | None:
        """A create or a delete happens once to a uid: the change it claims is ``<uid>/<verb>``."""
        if record.verb == "create":
            saw, hits = "created", [v for v in ours if self._within(v.created_at, record)]
        else:
            saw, hits = (
                "deleted",
                [v for v in ours if v.change == "DELETED" and self._within(v.observed_at, record)],
            )
        claim = f"{uid}/{record.verb}"
        if hits:
            first = next(v for v in self.ordered(uid) if v in hits)
            why = f"the watch saw {what} {saw} (resourceVersion {first.resource_version})"
            if claim not in self.taken:
                return self._decide(seq, record.caller, "verified", why, first, claim)
            return self._contest(seq, record, first, claim, why) if due else None
        if not due:
            return None
        window = f"within {self.window.total_seconds():.0f}s of the record"
        created = next((v for v in ours if v.created_at is not None), None)
        if record.verb == "create" and created is not None:
            assert created.created_at is not None
            why = f"the watch saw {what} created at {created.created_at.isoformat()}, not {window}"
            return self._decide(seq, record.caller, "contradicted", why, created)
        return self._decide(seq, record.caller, "unmatched", f"the watch did not see {what} {saw} {window}")

    def _judge_update(
        self, seq: int, record: AuditRecord, uid: str, ours: list[_Version], due: bool, what: str
    ) -> Decision | None:
        """An update is borne out by one version whose change from the one before is the claimed one."""
        assert record.object is not None
        judged = []
        for v in ours:
            previous = self.before(v)
            if v.change == "DELETED" or (v.change == "ADDED" and previous is None):
                continue  # its deletion or its creation: not an update
            if self._within(v.observed_at, record):
                seen = previous.seen() if previous else None
                judged.append((v, judge_update(record.object.kind, record.changes, seen, v.seen())))
        judged.sort(key=lambda vj: (abs(vj[0].observed_at - record.at), vj[0].resource_version))
        matches = [v for v, j in judged if j.outcome is ClaimOutcome.MATCH]
        for v, judgement in judged:
            claim = f"{uid}/{v.resource_version}"
            if judgement.outcome is ClaimOutcome.MATCH and claim not in self.taken:
                return self._decide(seq, record.caller, "verified", f"{what}: {judgement.why}", v, claim)
        if not due:
            return None
        if matches:
            why = next(f"{what}: {j.why}" for v, j in judged if v is matches[0])
            return self._contest(seq, record, matches[0], f"{uid}/{matches[0].resource_version}", why)
        for v, judgement in judged:
            if judgement.outcome in (ClaimOutcome.INVISIBLE, ClaimOutcome.UNKNOWN):
                return self._decide(seq, record.caller, "unobservable", f"{what}: {judgement.why}", v)
        if judged:  # every change of it in the window is another one
            v, judgement = judged[0]
            return self._decide(seq, record.caller, "contradicted", f"{what}: {judgement.why}", v)
        window = f"within {self.window.total_seconds():.0f}s of the record"
        return self._decide(seq, record.caller, "unmatched", f"the watch saw no change of {what} {window}")

    def unreadable(self, seq: int, why: str) -> Decision:
        """``unmatched``: a record that does not parse claims nothing that can be borne out."""
        return self._decide(seq, None, "unmatched", why)

    def _contest(self, seq: int, record: AuditRecord, version: _Version, claim: str, why: str) -> Decision:
        """``record`` claims a change another record holds (see the module): it takes it, loses,
        or both are disputed."""
        holder = self.taken[claim]
        rv = version.resource_version
        if record.caller == "mtls" and holder.caller != "mtls":
            self._revise(holder, "unmatched", displaced(seq, rv), rival=seq)
            self.taken[claim] = _Holder(seq, record.caller, "verified")
            return self._decide(seq, record.caller, "verified", why, version, rival=holder.seq)
        if record.caller == "mtls" or holder.caller == "mtls":
            taken = f"the change it claims (resourceVersion {rv}) bore out record seq {holder.seq} already"
            return self._decide(seq, record.caller, "unmatched", taken, version, rival=holder.seq)
        if holder.status != "disputed":
            self._revise(holder, "disputed", disputed_by(seq, rv), rival=seq)
        why = f"record seq {holder.seq} claims the same change (resourceVersion {rv}): {_UNTOLD}"
        return self._decide(seq, record.caller, "disputed", why, version, rival=holder.seq)

    def _revise(self, holder: _Holder, status: str, why: str, rival: int) -> None:
        """The holder's verdict now reads ``status``: its row, if decided in this round (an earlier
        round's is read so through the rival's row, :func:`verdicts`)."""
        why = clean_controls(why)[:MAX_DETAIL]
        earlier = holder.seq not in self.rows
        if not earlier:
            self.rows[holder.seq].update(status=status, detail=why)
        self.decisions[holder.seq] = Decision(holder.seq, status, holder.caller, why, rival, earlier)
        for key, held in self.taken.items():
            if held.seq == holder.seq:
                self.taken[key] = _Holder(held.seq, held.caller, status)

    def _decide(
        self,
        seq: int,
        caller: str | None,
        status: str,
        why: str,
        version: _Version | None = None,
        claim: str | None = None,
        rival: int | None = None,
    ) -> Decision:
        if claim is not None:
            self.taken[claim] = _Holder(seq, caller, status)
        why = clean_controls(why)[:MAX_DETAIL]  # names and paths come from the record: one line
        self.rows[seq] = {
            "audit_seq": seq,
            "status": status,
            "observed_at": version.observed_at if version else None,
            "decided_at": self.now,
            "claim": claim,
            "resource_version": version.resource_version if version else None,
            "detail": why,
            "rival": rival,
        }
        self.decisions[seq] = Decision(seq, status, caller, why, rival)
        return self.decisions[seq]


async def decide(
    conn: AsyncConnection, now: datetime, window: timedelta, batch: int = BATCH, after: int = 0
) -> list[Decision]:
    """Judge what can be judged now (see the module docstring); returns the verdicts stored.
    Only records after seq ``after`` are looked at (:func:`settled`). Versions older than a day
    go, except the newest of each job that still exists."""
    await lock_transaction(conn, DECIDE_LOCK)
    await conn.execute(_CUSTOM_PLANS)
    mtls_first = func.coalesce(AuditRow.record["caller"].astext, "") == "mtls"
    query = _PENDING.where(AuditRow.seq > after).order_by(mtls_first.desc(), AuditRow.seq).limit(batch)
    rows = (await conn.execute(query)).all()
    records: list[tuple[int, datetime, AuditRecord]] = []
    unreadable: list[tuple[int, str]] = []
    for seq, recorded_at, raw in rows:
        try:
            records.append((seq, recorded_at, AuditRecord.model_validate(raw)))
        except ValidationError as exc:  # chained by an older release, or by hand: judged all the same
            unreadable.append((seq, f"the record cannot be read: {exc.error_count()} invalid fields"))
    uids = sorted({r.object.uid for _, _, r in records if r.object and r.object.uid})
    versions: dict[str, list[_Version]] = defaultdict(list)
    if uids:
        found = await conn.execute(select(WatchChangeRow).where(WatchChangeRow.uid.in_(uids)))
        for row in found:
            versions[row.uid].append(_Version(**row._asdict()))
    keys = [
        key
        for uid, kept in versions.items()
        for key in (f"{uid}/create", f"{uid}/delete", *(f"{uid}/{v.resource_version}" for v in kept))
    ]
    taken = await _holders(conn, keys) if keys else {}
    judging = _Round(versions, taken, now, window)
    for seq, at, record in records:
        judging.judge(seq, at, record)
    for seq, why in unreadable:
        judging.unreadable(seq, why)
    stored: set[int] = set()
    if judging.rows:
        result = await conn.execute(
            insert(AdmissionCorroboration)
            .values(list(judging.rows.values()))
            .on_conflict_do_nothing()
            .returning(AdmissionCorroboration.audit_seq)
        )
        stored = set(result.scalars())
    stored |= {seq for seq, d in judging.decisions.items() if d.revised and d.rival in stored}
    await conn.execute(_PRUNE, {"cutoff": now - KEEP_CHANGES})
    return [d for d in judging.decisions.values() if d.seq in stored]


def _verdicts_by(key: QueryableAttribute[Any]) -> Select[Any]:
    """Each verdict's ``key``, its record's seq and ``caller``, and its status."""
    return select(
        key,
        AdmissionCorroboration.audit_seq,
        AuditRow.record["caller"].astext,
        AdmissionCorroboration.status,
    ).join(AuditRow, AuditRow.seq == AdmissionCorroboration.audit_seq)


async def _holders(conn: AsyncConnection, claims: list[str]) -> dict[str, _Holder]:
    """Who holds each of ``claims`` now: the record whose verdict took it, or the record from the
    API server's certificate that took it over from that one, with the holder's verdict as it
    reads (``disputed`` once another record disputed it)."""
    held = await conn.execute(
        _verdicts_by(AdmissionCorroboration.claim).where(AdmissionCorroboration.claim.in_(claims))
    )
    holders = {claim: _Holder(seq, caller, status) for claim, seq, caller, status in held if claim}
    if not holders:
        return holders
    rivals = await conn.execute(
        _verdicts_by(AdmissionCorroboration.rival)
        .where(AdmissionCorroboration.rival.in_([h.seq for h in holders.values()]))
        .where(AdmissionCorroboration.status.in_(("verified", "disputed")))
    )
    took: dict[int | None, _Holder] = {}
    disputed: set[int | None] = set()
    for rival, seq, caller, status in rivals:
        if status == "verified":
            took[rival] = _Holder(seq, caller, status)
        else:
            disputed.add(rival)
    for claim, holder in holders.items():
        if holder.seq in took:
            holders[claim] = took[holder.seq]
        elif holder.seq in disputed:
            holders[claim] = _Holder(holder.seq, holder.caller, "disputed")
    return holders


async def pending(conn: AsyncConnection, after: int = 0) -> int:
    """Admission records after seq ``after`` without a verdict yet."""
    await conn.execute(_CUSTOM_PLANS)
    waiting = _PENDING.where(AuditRow.seq > after).subquery()
    return int((await conn.execute(select(func.count()).select_from(waiting))).scalar_one())


async def settled(conn: AsyncConnection, after: int = 0) -> int:
    """A seq up to which every admission record has a verdict, given that all up to ``after``
    have: the next round need not look further back (verdicts are never removed, and new records
    are chained after every existing one). Keeps a round's cost to the records still waiting."""
    await conn.execute(_CUSTOM_PLANS)
    waiting = _PENDING.where(AuditRow.seq > after).subquery()
    first = (await conn.execute(select(func.min(waiting.c.seq)))).scalar_one()
    if first is not None:
        return int(first) - 1
    newest = (await conn.execute(select(func.max(AuditRow.seq)))).scalar_one()
    return max(after, int(newest or 0))


async def verdicts(conn: AsyncConnection, seqs: Sequence[int]) -> dict[int, CorroborationVerdict]:
    """The verdicts on the records ``seqs`` that have one: a ``verified`` record whose change a
    later record disputed reads ``disputed``, one whose change a record from the API server's
    certificate took over reads ``unmatched`` (see the module)."""
    if not seqs:
        return {}
    rows = await conn.execute(
        select(
            AdmissionCorroboration.audit_seq,
            AdmissionCorroboration.status,
            AdmissionCorroboration.observed_at,
            AdmissionCorroboration.detail,
        ).where(AdmissionCorroboration.audit_seq.in_(list(seqs)))
    )
    found = {
        seq: CorroborationVerdict(status, observed_at, detail) for seq, status, observed_at, detail in rows
    }
    held = [seq for seq, verdict in found.items() if verdict.status == "verified"]
    if held:
        rivals = await conn.execute(
            select(
                AdmissionCorroboration.rival,
                AdmissionCorroboration.audit_seq,
                AdmissionCorroboration.status,
                AdmissionCorroboration.resource_version,
            )
            .where(AdmissionCorroboration.rival.in_(held))
            .where(AdmissionCorroboration.status.in_(("verified", "disputed")))
            .order_by(AdmissionCorroboration.audit_seq)
        )
        for rival, seq, status, resource_version in rivals:
            if rival is None:  # the query asks for rivals in held: never
                continue
            was = found[rival]
            if status == "verified":  # taken over: wins over a dispute
                found[rival] = CorroborationVerdict(
                    "unmatched", was.observed_at, displaced(seq, resource_version)
                )
            elif found[rival].status == "verified":
                found[rival] = CorroborationVerdict(
                    "disputed", was.observed_at, disputed_by(seq, resource_version)
                )
    return found
