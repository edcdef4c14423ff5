"""The delivery outbox in PostgreSQL: what the notify consumer owes, claimed and settled by dispatchers.

The notify consumer inserts one row per (subscription, event) in the same transaction that
records the job and finding states it compared (:mod:`controller.store.notifystate`), then
acknowledges the bus messages; the row's id (the ``webhook-id``) is derived from both, so a
redelivered bus message inserts nothing twice. Dispatchers then work from this table alone,
which is why a crash loses nothing and retries survive restarts:

- :func:`claim` takes due rows atomically (a conditional ``UPDATE … RETURNING`` sets
  ``leased_until``), so several dispatchers never send one row at once and a dispatcher that
  dies mid-send is superseded after the lease; rows another dispatcher is claiming at that
  moment are skipped (``FOR UPDATE SKIP LOCKED``), not waited for. No index holds
  ``leased_until`` and the table leaves room on its pages (``fillfactor``), so a claim is a HOT
  update: a new row version on the same page and no index entry, where moving the indexed
  ``next_attempt_at`` wrote an entry into each of the table's five indexes;
- a row is claimable only when no earlier row of the same subscription and ``order_key``
  (the job uid; for email, the job name) is pending: one job's events reach an endpoint in
  order, while other jobs and other endpoints go on. A row enqueued behind a pending one is
  *parked* (``next_attempt_at`` = infinity) and made due when the row ahead settles
  (:func:`record`), so waiting rows are never scanned by a claim — with a slow endpoint
  holding thousands of them, claims would otherwise cost milliseconds each. A sweep
  (:func:`unpark_heads`) frees a row parked just as the row ahead settled in another
  transaction;
- due rows are read oldest first along an index (an index scan, which drops the entries of
  rows updated since as it passes them) and the scan stops after a window of candidates, so
  a claim costs the same with 100 or 100,000 rows waiting;
- at most ``per_endpoint`` rows of one subscription per claim, none of a saturated one;
- :func:`record` settles a batch of attempts in one statement — each row's state, the attempt
  log, how long each endpoint has been failing, the rows the batch frees — and disables the
  endpoints failing past the threshold, with a notice; it says how many rows it freed, so a
  dispatcher claims again only when there may be something to claim.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.store.bulk import among, unnest_insert
from controller.store.models import DeliveryAttemptRow, DeliveryRow, SubscriptionRow
from controller.store.subscriptions import SubscriptionRecord, add_notices
from controller.store.wakeups import announce

Row = dict[str, Any]
AttemptResult = Literal["delivered", "retry", "failed"]

WAKE_CHANNEL = "mpijc_outbox"
"""PostgreSQL channel announced when deliveries become due now (new, redelivered, resumed)."""

_INFINITY = datetime.max.replace(tzinfo=UTC)  # asyncpg sends it as PostgreSQL's 'infinity'


def is_parked(next_attempt_at: datetime) -> bool:
    """Whether a pending delivery waits behind an earlier one (asyncpg reads 'infinity' as max)."""
    return next_attempt_at.replace(tzinfo=None) == datetime.max


# Fixed namespace of delivery ids; never change it, or redelivered bus messages enqueue twice.
_DELIVERY_NAMESPACE = uuid.UUID("2b0f7c8e-5d1a-4c47-9e3b-6a2d8f1c0e55")


def delivery_id(subscription_id: str, event_key: str) -> str:
    """The ``webhook-id`` of one event for one subscription: stable, so it is the idempotency key."""
    return "msg_" + uuid.uuid5(_DELIVERY_NAMESPACE, f"{subscription_id}/{event_key}").hex


_ENQUEUE = unnest_insert(
    DeliveryRow,
    (
        "id",
        "subscription_id",
        "channel",
        "event_type",
        "order_key",
        "namespace",
        "job_name",
        "job_uid",
        "body",
        "status",
        "attempts",
        "next_attempt_at",
        "event_at",
        "created_at",
    ),
    "ON CONFLICT (id) DO NOTHING RETURNING id",
)


_AHEAD_PENDING = """EXISTS (
    SELECT 1 FROM deliveries e
    WHERE e.subscription_id = d.subscription_id AND e.order_key = d.order_key
      AND e.status = 'pending' AND e.seq < d.seq)"""
"""SQL: an earlier delivery of row ``d``'s subscription and order key is pending (``d`` waits)."""

_PARK_BEHIND = text(
    f"""
    UPDATE deliveries d SET next_attempt_at = coalesce(v.due, 'infinity')
    FROM unnest(CAST(:ids AS varchar[]), CAST(:dues AS timestamptz[])) AS v(id, due)
    WHERE d.id = v.id AND (d.next_attempt_at = 'infinity') <> {_AHEAD_PENDING}
    """
)
"""SQL: park the new rows ``:ids`` that wait behind a pending one, and make due those inserted
parked (their time in ``:dues``) that do not."""


async def enqueue(conn: AsyncConnection, rows: Sequence[Row]) -> set[str]:
    """Insert deliveries, skipping ids already there, parking those behind a pending one.

    Returns the ids that were new. One statement of column arrays, whatever the number of
    rows: a multi-row VALUES list would be parsed anew for every batch size (tens of ms for
    a thousand rows). A row behind an earlier one of the batch (a job's events consumed
    together) is inserted parked, rather than inserted due and parked by a second write of
    the row and all its index entries; one more statement parks the rows behind pending
    ones of earlier batches and corrects a guess the insert got wrong (an earlier row of the
    batch that was already there, settled)."""
    if not rows:
        return set()
    heads: set[tuple[str, str]] = set()
    guessed: dict[str, datetime] = {}
    inserted: list[Row] = []
    for r in rows:
        chain = (r["subscription_id"], r["order_key"])
        if chain in heads:
            guessed[r["id"]] = r["next_attempt_at"]
            inserted.append({**r, "next_attempt_at": _INFINITY})
        else:
            heads.add(chain)
            inserted.append(r)
    result = await _ENQUEUE.execute(conn, inserted)
    new = sorted(result.scalars().all())
    if new:
        await conn.execute(_PARK_BEHIND, {"ids": new, "dues": [guessed.get(i) for i in new]})
        await announce(conn, WAKE_CHANNEL)
    return set(new)


# --------------------------------------------------------------------------- dispatching


@dataclass(frozen=True)
class Claim:
    """A delivery a dispatcher holds the lease of."""

    seq: int
    id: str
    subscription_id: str
    channel: str
    event_type: str
    order_key: str
    body: str
    attempts: int


_UNLEASED = "(d.leased_until IS NULL OR d.leased_until <= :now)"
"""SQL: no dispatcher holds row ``d`` at ``:now`` (never leased, settled since, or its lease ran out)."""

_CLAIM = text(
    f"""
    WITH heads AS (
        SELECT d.seq, d.subscription_id
        FROM deliveries d
        WHERE d.status = 'pending' AND d.next_attempt_at <= :now AND {_UNLEASED}
          AND NOT (d.subscription_id = ANY(CAST(:saturated AS varchar[])))
          AND NOT {_AHEAD_PENDING}
          AND EXISTS (
              SELECT 1 FROM subscriptions s
              WHERE s.id = d.subscription_id AND s.state NOT IN ('disabled', 'suspended')
          )
        ORDER BY d.next_attempt_at, d.seq
        LIMIT :window
    ), ranked AS (
        SELECT seq, row_number() OVER (PARTITION BY subscription_id ORDER BY seq) AS rank FROM heads
    ), chosen AS (
        SELECT seq FROM ranked WHERE rank <= :per_endpoint ORDER BY seq LIMIT :limit
    ), locked AS (
        SELECT d.seq FROM deliveries d WHERE d.seq IN (SELECT seq FROM chosen)
        FOR UPDATE OF d SKIP LOCKED
    )
    UPDATE deliveries d SET leased_until = :lease_until
    FROM locked
    WHERE d.seq = locked.seq AND d.status = 'pending' AND d.next_attempt_at <= :now AND {_UNLEASED}
    RETURNING d.seq, d.id, d.subscription_id, d.channel, d.event_type, d.order_key, d.body, d.attempts
    """
)


_CUSTOM_PLAN = text(
    "SELECT set_config('plan_cache_mode', 'force_custom_plan', true),"
    " set_config('enable_bitmapscan', 'off', true)"
)


async def claim(
    conn: AsyncConnection,
    now: datetime,
    lease_until: datetime,
    limit: int,
    per_endpoint: int,
    saturated: Collection[str] = (),
) -> list[Claim]:
    """Lease up to ``limit`` due deliveries, oldest first (see the module docstring for which).

    Planned anew each time (in the caller's transaction): the outbox swings from empty to tens
    of thousands of rows, and a generic plan cached while it was empty (asyncpg prepares the
    statement; PostgreSQL switches to a generic plan after five executions) costs seconds per
    claim once it is full. Bitmap scans are off for that transaction: every settle takes a row
    out of the due index (a retry moves it within), leaving a dead entry there each time, and
    an ordered index scan marks those dead as it passes (the next claim skips them) where a
    bitmap scan visits their heap pages again on every claim until a vacuum — measured at a
    steady 250 deliveries/s, PostgreSQL's time in claims grew from 8 % to 21 % of a core
    within 30 s with bitmap scans, and stayed at 6 to 7 % without. Rows in flight stay in the
    due index (their lease is not in it); the scan passes over them, at most ``max_in_flight``
    per dispatcher."""
    await conn.execute(_CUSTOM_PLAN)
    rows = await conn.execute(
        _CLAIM,
        {
            "now": now,
            "lease_until": lease_until,
            "limit": limit,
            "per_endpoint": per_endpoint,
            "saturated": sorted(saturated),
            "window": limit * CLAIM_WINDOW,
        },
    )
    return sorted((Claim(**row._mapping) for row in rows), key=lambda c: c.seq)


async def endpoints(conn: AsyncConnection, ids: Collection[str]) -> dict[str, SubscriptionRecord]:
    """The subscriptions claimed deliveries go to (their URL, secrets, recipients)."""
    rows = await conn.execute(select(*SubscriptionRow.__table__.c).where(among(SubscriptionRow.id, ids)))
    return {row.id: SubscriptionRecord(**row._mapping) for row in rows}


@dataclass(frozen=True)
class Outcome:
    """How one attempt of one delivery ended, and what happens to the delivery next."""

    seq: int
    subscription_id: str
    attempt: int
    at: datetime
    result: AttemptResult
    order_key: str = ""
    next_attempt_at: datetime | None = None
    status_code: int | None = None
    latency_ms: float = 0.0
    error: str | None = None
    endpoint_failed: bool | None = None
    """True: counts toward auto-disable; False: the endpoint works; None: says nothing of it."""
    disable: str | None = None
    """Disable the subscription at once, for this reason (the endpoint answered 410 Gone)."""

    @property
    def status(self) -> str:
        return "pending" if self.result == "retry" else self.result


@dataclass(frozen=True)
class Disabled:
    """A subscription :func:`record` switched off."""

    subscription_id: str
    reason: str


CLAIM_WINDOW = 4
"""A claim of ``limit`` rows looks at up to ``limit`` x this many candidate rows (per-endpoint caps)."""

_UNPARK_HEADS = text(
    f"""
    UPDATE deliveries d SET next_attempt_at = :now
    WHERE d.status = 'pending' AND d.next_attempt_at = 'infinity' AND NOT {_AHEAD_PENDING}
    RETURNING d.seq
    """
)
_SETTLE = text(
    """
    WITH v AS (
        SELECT * FROM unnest(
            CAST(:seqs AS bigint[]), CAST(:subs AS varchar[]), CAST(:keys AS text[]),
            CAST(:outcomes AS varchar[]), CAST(:attempts AS integer[]), CAST(:ats AS timestamptz[]),
            CAST(:nexts AS timestamptz[]), CAST(:codes AS integer[]), CAST(:errors AS text[]),
            CAST(:latencies AS float8[])
        ) AS v(seq, sub, key, outcome, attempt, at, next_at, code, error, latency_ms)
    ), settled AS (
        UPDATE deliveries d SET
            status = CASE WHEN v.outcome = 'retry' THEN 'pending' ELSE v.outcome END,
            attempts = v.attempt,
            next_attempt_at = coalesce(v.next_at, d.next_attempt_at),
            leased_until = NULL,
            finished_at = CASE WHEN v.outcome = 'retry' THEN NULL ELSE v.at END,
            last_status_code = v.code, last_error = v.error, last_latency_ms = v.latency_ms
        FROM v WHERE d.seq = v.seq
    ), logged AS (
        INSERT INTO delivery_attempts (delivery_seq, attempt, at, outcome, status_code, latency_ms, error)
        SELECT seq, attempt, at, outcome, code, latency_ms, error FROM v
    ), healed AS (
        UPDATE subscriptions s SET failing_since = NULL
        WHERE s.id = ANY(CAST(:healthy AS varchar[])) AND s.failing_since IS NOT NULL
    ), failing AS (
        UPDATE subscriptions s SET failing_since = f.since
        FROM unnest(CAST(:failing AS varchar[]), CAST(:sinces AS timestamptz[])) AS f(id, since)
        WHERE s.id = f.id AND s.failing_since IS NULL
    ), heads AS (
        SELECT h.seq
        FROM (
            SELECT DISTINCT sub, key, array_agg(seq) OVER (PARTITION BY sub) AS done
            FROM v WHERE outcome <> 'retry'
        ) AS c
        CROSS JOIN LATERAL (
            SELECT e.seq FROM deliveries e
            WHERE e.subscription_id = c.sub AND e.order_key = c.key AND e.status = 'pending'
              AND e.seq <> ALL(c.done)
            ORDER BY e.seq LIMIT 1
        ) AS h
    )
    UPDATE deliveries d SET next_attempt_at = :now
    FROM heads WHERE d.seq = heads.seq AND d.next_attempt_at = 'infinity'
    RETURNING d.seq
    """
)
"""SQL: settle a batch of attempts in one statement (each ``WITH`` part sees the rows as they
were before it): set each delivery's state, log the attempt, clear or start its endpoint's
``failing_since``, and make due the chain head each finished delivery leaves — the first row
of its subscription and order key still pending once the batch is settled, if it was parked.
Each chain's head is looked up on its own (``LATERAL … LIMIT 1`` along ``ix_deliveries_chain``,
past the rows of its subscription the batch finishes — an email digest's rows carry no order
key): joined as a set, PostgreSQL hashed every pending row of the outbox on each settle."""


@dataclass(frozen=True)
class Recorded:
    """What settling a batch changed beyond its own rows."""

    freed: int
    """Deliveries that were parked behind a settled one and are due now."""
    disabled: list[Disabled]


async def record(
    conn: AsyncConnection, outcomes: Sequence[Outcome], now: datetime, disable_after: timedelta
) -> Recorded:
    """Settle attempts, log them, track endpoint health and free the rows they held back: one
    statement for the batch, whatever its size (and a few more when an endpoint may be disabled)."""
    if not outcomes:
        return Recorded(0, [])
    last: dict[str, Outcome] = {}
    first_failure: dict[str, datetime] = {}
    for o in sorted(outcomes, key=lambda o: o.at):
        if o.endpoint_failed is None:
            continue
        last[o.subscription_id] = o
        if o.endpoint_failed:
            first_failure.setdefault(o.subscription_id, o.at)
        else:
            first_failure.pop(o.subscription_id, None)
    failing = {s: first_failure[s] for s, o in sorted(last.items()) if o.endpoint_failed}
    freed = await conn.execute(
        _SETTLE,
        {
            "seqs": [o.seq for o in outcomes],
            "subs": [o.subscription_id for o in outcomes],
            "keys": [o.order_key for o in outcomes],
            "outcomes": [o.result for o in outcomes],
            "attempts": [o.attempt for o in outcomes],
            "ats": [o.at for o in outcomes],
            "nexts": [o.next_attempt_at for o in outcomes],
            "codes": [o.status_code for o in outcomes],
            "errors": [o.error for o in outcomes],
            "latencies": [o.latency_ms for o in outcomes],
            "healthy": sorted(s for s, o in last.items() if not o.endpoint_failed),
            "failing": list(failing),
            "sinces": list(failing.values()),
            "now": now,
        },
    )
    count = len(freed.all())
    if not failing:
        return Recorded(count, [])
    return Recorded(count, await _disable(conn, failing, last, now, disable_after))


async def _disable(
    conn: AsyncConnection,
    failing: Collection[str],
    last: dict[str, Outcome],
    now: datetime,
    disable_after: timedelta,
) -> list[Disabled]:
    """Disable the failing endpoints that answered 410 Gone or have failed for ``disable_after``."""
    reasons = {s: f"disabled automatically: {last[s].disable}" for s in failing if last[s].disable}
    stale = (
        await conn.execute(
            select(SubscriptionRow.id, SubscriptionRow.failing_since).where(
                among(SubscriptionRow.id, failing),
                SubscriptionRow.state == "active",
                SubscriptionRow.failing_since <= now - disable_after,
            )
        )
    ).all()
    for sub_id, since in stale:
        reasons.setdefault(
            sub_id,
            f"disabled automatically: every attempt failed since {since:%Y-%m-%d %H:%M:%S} UTC "
            f"(more than {disable_after}); last error: {_describe(last[sub_id])}",
        )
    disabled: list[Disabled] = []
    for sub_id, reason in sorted(reasons.items()):
        result = await conn.execute(
            update(SubscriptionRow)
            .where(SubscriptionRow.id == sub_id, SubscriptionRow.state == "active")
            .values(state="disabled", disabled_at=now, disabled_reason=reason, updated_at=now)
            .returning(SubscriptionRow.id)
        )
        if result.first() is not None:
            disabled.append(Disabled(sub_id, reason))
    await add_notices(
        conn,
        [
            {"subscription_id": d.subscription_id, "kind": "disabled", "message": d.reason, "at": now}
            for d in disabled
        ],
    )
    return disabled


def _describe(outcome: Outcome) -> str:
    if outcome.status_code is not None:
        return f"HTTP {outcome.status_code}" + (f" ({outcome.error})" if outcome.error else "")
    return outcome.error or "unknown"


async def defer(conn: AsyncConnection, seqs: Collection[int], until: datetime) -> None:
    """Hold pending deliveries until ``until`` without counting an attempt (email throttling)."""
    await conn.execute(
        update(DeliveryRow)
        .where(among(DeliveryRow.seq, seqs), DeliveryRow.status == "pending")
        .values(next_attempt_at=until, leased_until=None)
    )


async def resume(conn: AsyncConnection, subscription_id: str, now: datetime) -> None:
    """Make a re-enabled subscription's pending deliveries due now, not at their old retry times
    (parked ones stay parked behind them)."""
    await conn.execute(
        update(DeliveryRow)
        .where(
            DeliveryRow.subscription_id == subscription_id,
            DeliveryRow.status == "pending",
            DeliveryRow.next_attempt_at > now,
            DeliveryRow.next_attempt_at < _INFINITY,
        )
        .values(next_attempt_at=now)
    )
    await announce(conn, WAKE_CHANNEL)


async def pending_group(conn: AsyncConnection, subscription_id: str, order_key: str) -> list[Claim]:
    """Every pending delivery of one subscription and order key, oldest first (an email digest)."""
    rows = await conn.execute(
        select(
            DeliveryRow.seq,
            DeliveryRow.id,
            DeliveryRow.subscription_id,
            DeliveryRow.channel,
            DeliveryRow.event_type,
            DeliveryRow.order_key,
            DeliveryRow.body,
            DeliveryRow.attempts,
        )
        .where(
            DeliveryRow.subscription_id == subscription_id,
            DeliveryRow.order_key == order_key,
            DeliveryRow.status == "pending",
        )
        .order_by(DeliveryRow.seq)
    )
    return [Claim(**row._mapping) for row in rows]


async def last_delivered(conn: AsyncConnection, subscription_id: str, order_key: str) -> datetime | None:
    """When the last delivery of this subscription and order key went out."""
    value: datetime | None = (
        await conn.execute(
            select(func.max(DeliveryRow.finished_at)).where(
                DeliveryRow.subscription_id == subscription_id,
                DeliveryRow.order_key == order_key,
                DeliveryRow.status == "delivered",
            )
        )
    ).scalar_one()
    return value


async def unpark_heads(conn: AsyncConnection, now: datetime) -> int:
    """Make parked rows with nothing pending ahead of them due; returns how many there were.

    Parking and settling race in one case: a row is parked because the row ahead is
    pending, and that row settles in a transaction that cannot see the new one yet."""
    return len((await conn.execute(_UNPARK_HEADS, {"now": now})).all())


_DUE_BY = text(
    f"""
    SELECT count(*) FROM deliveries d
    WHERE d.status = 'pending'
      AND ((d.next_attempt_at <= :due_by AND (d.leased_until IS NULL OR d.leased_until <= :due_by))
           OR (d.next_attempt_at = 'infinity' AND NOT {_AHEAD_PENDING}))
    """
)
"""SQL: rows due by ``:due_by``, with the parked rows whose row ahead has settled (the sweep frees them)."""


async def pending_count(conn: AsyncConnection, due_by: datetime | None = None) -> int:
    """Deliveries not yet settled (the queue depth); with ``due_by``, only those due by then: claimed
    ones until their lease ends and parked ones whose row ahead has settled (a race that
    :func:`unpark_heads` resolves), not those deferred past it (emails waiting for their digest
    window) nor those parked behind one."""
    if due_by is not None:
        due: int = (await conn.execute(_DUE_BY, {"due_by": due_by})).scalar_one()
        return due
    query = select(func.count()).select_from(DeliveryRow).where(DeliveryRow.status == "pending")
    count: int = (await conn.execute(query)).scalar_one()
    return count


async def purge(conn: AsyncConnection, before: datetime) -> int:
    """Delete settled deliveries (and their attempts) finished before ``before``."""
    result = await conn.execute(
        delete(DeliveryRow)
        .where(DeliveryRow.status != "pending", DeliveryRow.finished_at < before)
        .returning(DeliveryRow.seq)
    )
    return len(result.all())


# --------------------------------------------------------------------------- delivery log


async def list_deliveries(
    conn: AsyncConnection,
    subscription_id: str,
    *,
    status: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[DeliveryRow]:
    """A subscription's deliveries, newest first; ``before`` is the ``seq`` cursor of the last row seen."""
    query = select(DeliveryRow).where(DeliveryRow.subscription_id == subscription_id)
    if status is not None:
        query = query.where(DeliveryRow.status == status)
    if before is not None:
        query = query.where(DeliveryRow.seq < before)
    rows = await conn.execute(query.order_by(DeliveryRow.seq.desc()).limit(limit))
    return [DeliveryRow(**row._mapping) for row in rows]


async def attempts_of(conn: AsyncConnection, seqs: Collection[int]) -> dict[int, list[DeliveryAttemptRow]]:
    """The attempt log of deliveries, oldest attempt first."""
    found: dict[int, list[DeliveryAttemptRow]] = {seq: [] for seq in seqs}
    rows = await conn.execute(
        select(DeliveryAttemptRow)
        .where(among(DeliveryAttemptRow.delivery_seq, seqs))
        .order_by(DeliveryAttemptRow.delivery_seq, DeliveryAttemptRow.id)
    )
    for row in rows:
        found[row.delivery_seq].append(DeliveryAttemptRow(**row._mapping))
    return found


async def get_delivery(conn: AsyncConnection, delivery: str) -> DeliveryRow | None:
    row = (await conn.execute(select(DeliveryRow).where(DeliveryRow.id == delivery))).first()
    return DeliveryRow(**row._mapping) if row else None


async def redeliver(conn: AsyncConnection, delivery: str, now: datetime) -> DeliveryRow | None:
    """Queue a settled delivery again, same ``webhook-id``, with a fresh retry schedule."""
    row = (
        await conn.execute(
            update(DeliveryRow)
            .where(DeliveryRow.id == delivery, DeliveryRow.status != "pending")
            .values(status="pending", attempts=0, next_attempt_at=now, leased_until=None, finished_at=None)
            .returning(*DeliveryRow.__table__.c)
        )
    ).first()
    if row is None:
        return None
    await announce(conn, WAKE_CHANNEL)
    return DeliveryRow(**row._mapping)
