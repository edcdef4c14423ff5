"""Subscriptions in PostgreSQL: the queries the API and the notify consumer share.

A subscription is ``active`` (matched and delivered), ``disabled`` (by its owner, or
automatically after failing for ``notify.disable_after_s``; its pending deliveries wait)
or ``expired`` (a one-shot that fired, or past ``expires_at``; what it already owes is
still delivered). Secrets are kept in clear because HMAC signing needs them; they are
shown to the API client once, at creation or rotation, and never listed.

Reads return :class:`SubscriptionRecord`, a plain frozen record rather than an ORM instance:
the consumer reads every active subscription per batch and the dispatcher its endpoints per
claim, and building instrumented ORM objects cost more CPU than the rest of the match.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.store.models import Subscription, SubscriptionNotice

Row = dict[str, Any]


def new_id(prefix: str) -> str:
    """A random id such as ``sub_1f0c…``: no ``.``, so it is also a valid Standard Webhooks token."""
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    """One row of ``subscriptions`` (see :class:`controller.store.models.Subscription` for the columns)."""

    id: str
    channel: str
    state: str
    namespace: str | None
    job_name: str | None
    label_selector: str | None
    event_types: list[str]
    rules: list[str]
    severities: list[str]
    url: str | None
    recipients: list[str]
    secret: str | None
    previous_secret: str | None
    previous_secret_until: datetime | None
    one_shot: bool
    expires_at: datetime | None
    fired_at: datetime | None
    description: str
    created_by: str
    created_at: datetime
    updated_at: datetime
    failing_since: datetime | None
    disabled_at: datetime | None
    disabled_reason: str | None


def _subscription(row: Any) -> SubscriptionRecord:
    return SubscriptionRecord(**row._mapping)


async def insert_subscription(conn: AsyncConnection, row: Row) -> SubscriptionRecord:
    """Store a new subscription (every column given)."""
    stored = (await conn.execute(insert(Subscription).values(row).returning(*Subscription.__table__.c))).one()
    return _subscription(stored)


async def get_subscription(conn: AsyncConnection, subscription_id: str) -> SubscriptionRecord | None:
    row = (await conn.execute(select(Subscription).where(Subscription.id == subscription_id))).first()
    return _subscription(row) if row else None


async def list_subscriptions(
    conn: AsyncConnection,
    *,
    visible: frozenset[str] | None,
    namespace: str | None = None,
    channel: str | None = None,
    state: str | None = None,
    after: str | None = None,
    limit: int = 50,
) -> list[SubscriptionRecord]:
    """Subscriptions by id; ``visible`` limits namespaces (``None``: all, cluster-wide ones included)."""
    query = select(Subscription)
    if visible is not None:
        query = query.where(Subscription.namespace.in_(sorted(visible)))
    for column, value in (
        (Subscription.namespace, namespace),
        (Subscription.channel, channel),
        (Subscription.state, state),
    ):
        if value is not None:
            query = query.where(column == value)
    if after is not None:
        query = query.where(Subscription.id > after)
    rows = await conn.execute(query.order_by(Subscription.id).limit(limit))
    return [_subscription(row) for row in rows]


async def update_subscription(
    conn: AsyncConnection, subscription_id: str, changes: Row
) -> SubscriptionRecord | None:
    """Apply ``changes``; ``None`` if there is no such subscription."""
    row = (
        await conn.execute(
            update(Subscription)
            .where(Subscription.id == subscription_id)
            .values(changes)
            .returning(*Subscription.__table__.c)
        )
    ).first()
    return _subscription(row) if row else None


async def delete_subscription(conn: AsyncConnection, subscription_id: str) -> bool:
    """Delete a subscription with its deliveries and notices; whether it existed."""
    result = await conn.execute(
        delete(Subscription).where(Subscription.id == subscription_id).returning(Subscription.id)
    )
    return result.first() is not None


async def active_subscriptions(conn: AsyncConnection) -> list[SubscriptionRecord]:
    """Every active subscription (the caller checks ``expires_at``)."""
    rows = await conn.execute(select(*Subscription.__table__.c).where(Subscription.state == "active"))
    return [_subscription(row) for row in rows]


_FINGERPRINT = text(
    "SELECT count(*), coalesce(sum(hashtextextended(id || '|' || updated_at::text, 0)), 0) "
    "FROM subscriptions WHERE state = 'active'"
)


async def active_fingerprint(conn: AsyncConnection) -> tuple[int, int]:
    """Changes whenever an active subscription is added, changed (``updated_at``) or leaves ``active``."""
    count, digest = (await conn.execute(_FINGERPRINT)).one()
    return int(count), int(digest)


async def expire_one_shot(conn: AsyncConnection, subscription_id: str, now: datetime) -> bool:
    """Mark a one-shot subscription fired; ``False`` if it already had (another event won)."""
    result = await conn.execute(
        update(Subscription)
        .where(Subscription.id == subscription_id, Subscription.state == "active")
        .values(state="expired", fired_at=now, updated_at=now)
        .returning(Subscription.id)
    )
    return result.first() is not None


async def add_notices(conn: AsyncConnection, notices: Sequence[Row]) -> None:
    """Record notices (``subscription_id``, ``kind``, ``message``, ``at``)."""
    if notices:
        await conn.execute(insert(SubscriptionNotice), list(notices))


async def notices_of(
    conn: AsyncConnection, subscription_id: str, limit: int = 20
) -> list[SubscriptionNotice]:
    """The newest notices of a subscription first."""
    rows = await conn.execute(
        select(SubscriptionNotice)
        .where(SubscriptionNotice.subscription_id == subscription_id)
        .order_by(SubscriptionNotice.id.desc())
        .limit(limit)
    )
    return [SubscriptionNotice(**row._mapping) for row in rows]
