"""Subscriptions in PostgreSQL: the queries the API and the notify consumer share.

A subscription is ``active`` (matched and delivered), ``disabled`` (by its owner, or
automatically after failing for ``notify.disable_after_s``; its pending deliveries wait),
``suspended`` (its creator may no longer read where it points: :func:`suspend` and
:func:`resume`, called by the API's re-check; not matched, its pending deliveries wait) or
``expired`` (a one-shot that fired, or past ``expires_at``; what it already owes is still
delivered). ``disabled_at`` and ``disabled_reason`` say since when and why a disabled or
suspended one is not active. Secrets are shown to the API client once, at creation or rotation, and
never listed.

Signing secrets are encrypted at rest when keys are configured (``notify.secret_keys``,
``MPIJC_NOTIFY__SECRET_KEYS``): :func:`insert_subscription` and :func:`update_subscription`
store ``enc:v1:<key id>:<token>`` in the same columns (AES-256-GCM, a random nonce per value,
bound to the key id and the subscription id), and :meth:`SecretBox.open` turns a stored value
back into the secret where a webhook is signed. Records keep the stored form, so reading every
active subscription decrypts nothing. Values without the prefix — written before keys were
set, or while none are — are read as they are, and are encrypted when the secret is next
rotated (the old one moves to ``previous_secret``). The first key encrypts, every key
decrypts: put a new key first, rotate the secrets (or wait for them to be rotated), then drop
the old key. Without keys, secrets are stored in clear, as HMAC signing needs them, and a
warning says so once at start.

Reads return :class:`SubscriptionRecord`, a plain frozen record rather than an ORM instance:
the consumer reads every active subscription per batch and the dispatcher its endpoints per
claim, and building instrumented ORM objects cost more CPU than the rest of the match.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import delete, func, insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.store.engine import lock_transaction
from controller.store.filters import matching
from controller.store.models import SubscriptionNotice, SubscriptionRow

log = logging.getLogger(__name__)

Row = dict[str, Any]

ENCRYPTED_PREFIX = "enc:v1:"
"""Stored secrets starting with this are ``enc:v1:<key id>:<base64url(nonce | ciphertext | tag)>``."""
KEYS_VARIABLE = "MPIJC_NOTIFY__SECRET_KEYS"
_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_SECRET_COLUMNS = ("secret", "previous_secret")


class SecretKeyError(ValueError):
    """The secret keys are malformed, or a stored secret cannot be decrypted with them."""


class SecretBox:
    """Encrypts signing secrets for storage and decrypts them for signing (AES-256-GCM)."""

    def __init__(self, keys: Mapping[str, bytes]) -> None:
        for key_id, key in keys.items():
            if not _KEY_ID.match(key_id):
                raise SecretKeyError(f"{KEYS_VARIABLE}: key id {key_id!r} is not letters, digits and _.-")
            if len(key) != 32:
                raise SecretKeyError(f"{KEYS_VARIABLE}: key {key_id!r} has {len(key)} bytes, not 32")
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}
        self._writer = next(iter(keys), None)

    @classmethod
    def from_settings(cls, keys: Mapping[str, Any]) -> SecretBox:
        """From ``notify.secret_keys``: key id → base64 of 32 bytes (``SecretStr`` or ``str``)."""
        decoded: dict[str, bytes] = {}
        for key_id, value in keys.items():
            text = value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
            try:
                decoded[key_id] = base64.b64decode(text.strip(), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise SecretKeyError(f"{KEYS_VARIABLE}: key {key_id!r} is not base64") from exc
        return cls(decoded)

    @property
    def encrypts(self) -> bool:
        """Whether values are encrypted when written (some key is configured)."""
        return self._writer is not None

    @staticmethod
    def _context(key_id: str, subscription_id: str) -> bytes:
        return f"mpijc/webhook-secret/v1/{key_id}/{subscription_id}".encode()

    def seal(self, secret: str | None, subscription_id: str) -> str | None:
        """The stored form of ``secret`` (already stored forms and ``None`` pass as they are)."""
        if secret is None or self._writer is None or secret.startswith(ENCRYPTED_PREFIX):
            return secret
        nonce = os.urandom(12)
        sealed = self._ciphers[self._writer].encrypt(
            nonce, secret.encode(), self._context(self._writer, subscription_id)
        )
        token = base64.urlsafe_b64encode(nonce + sealed).decode().rstrip("=")
        return f"{ENCRYPTED_PREFIX}{self._writer}:{token}"

    def open(self, stored: str | None, subscription_id: str) -> str | None:
        """The secret a stored value holds; a value stored in clear is returned as it is."""
        if stored is None or not stored.startswith(ENCRYPTED_PREFIX):
            return stored
        key_id, _, token = stored.removeprefix(ENCRYPTED_PREFIX).partition(":")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise SecretKeyError(
                f"the signing secret of {subscription_id} is encrypted with key {key_id!r}, "
                f"which {KEYS_VARIABLE} does not hold"
            )
        try:
            raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            plain = cipher.decrypt(raw[:12], raw[12:], self._context(key_id, subscription_id))
        except (InvalidTag, ValueError, binascii.Error) as exc:
            raise SecretKeyError(
                f"the signing secret of {subscription_id} does not decrypt with key {key_id!r}"
            ) from exc
        return plain.decode()


@dataclass
class _Installed:
    box: SecretBox | None = None
    warned_clear: bool = False


_installed = _Installed()


def use_secret_keys(keys: Mapping[str, Any]) -> SecretBox:
    """Install the keys this process encrypts and decrypts signing secrets with (at start, from
    ``notify.secret_keys``); warns once per process when there are none."""
    box = _installed.box = SecretBox.from_settings(keys)
    if not box.encrypts and not _installed.warned_clear:
        _installed.warned_clear = True
        log.warning(
            "webhook signing secrets are stored in clear: set %s (JSON: key id -> base64 of 32 random "
            "bytes) to encrypt them at rest",
            KEYS_VARIABLE,
        )
    return box


def secret_box() -> SecretBox:
    """The installed :class:`SecretBox`; if none was, one from ``MPIJC_NOTIFY__SECRET_KEYS``."""
    if _installed.box is not None:
        return _installed.box
    raw = os.environ.get(KEYS_VARIABLE, "").strip()
    try:
        keys = json.loads(raw) if raw else {}
    except ValueError as exc:
        raise SecretKeyError(f"{KEYS_VARIABLE}: not valid JSON") from exc
    if not isinstance(keys, dict):
        raise SecretKeyError(f"{KEYS_VARIABLE}: not a JSON object of key id -> base64 key")
    return use_secret_keys(keys)


def _sealed(values: Row, subscription_id: str) -> Row:
    if not any(values.get(column) for column in _SECRET_COLUMNS):
        return values
    box = secret_box()
    return {
        **values,
        **{c: box.seal(values[c], subscription_id) for c in _SECRET_COLUMNS if c in values},
    }


def new_id(prefix: str) -> str:
    """A random id such as ``sub_1f0c…``: no ``.``, so it is also a valid Standard Webhooks token."""
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass(frozen=True, slots=True)
class SubscriptionRecord:
    """One row of ``subscriptions`` (see :class:`controller.store.models.SubscriptionRow` for the columns)."""

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
    creator: dict[str, Any] | None
    format: str = "standard"


def _subscription(row: Any) -> SubscriptionRecord:
    return SubscriptionRecord(**row._mapping)


async def insert_subscription(conn: AsyncConnection, row: Row) -> SubscriptionRecord:
    """Store a new subscription (every column given); its secret is encrypted when keys are set."""
    row = _sealed(row, str(row.get("id", "")))
    stored = (
        await conn.execute(insert(SubscriptionRow).values(row).returning(*SubscriptionRow.__table__.c))
    ).one()
    return _subscription(stored)


async def get_subscription(conn: AsyncConnection, subscription_id: str) -> SubscriptionRecord | None:
    row = (await conn.execute(select(SubscriptionRow).where(SubscriptionRow.id == subscription_id))).first()
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
    query = select(SubscriptionRow)
    if visible is not None:
        query = query.where(SubscriptionRow.namespace.in_(sorted(visible)))
    query = matching(
        query,
        (
            (SubscriptionRow.namespace, namespace),
            (SubscriptionRow.channel, channel),
            (SubscriptionRow.state, state),
        ),
    )
    if after is not None:
        query = query.where(SubscriptionRow.id > after)
    rows = await conn.execute(query.order_by(SubscriptionRow.id).limit(limit))
    return [_subscription(row) for row in rows]


QUOTA_LOCK = 0x6D706A63_0005
"""``pg_advisory_xact_lock`` key that serializes quota checks with the inserts they guard ("mpjc")."""


async def quota_usage(conn: AsyncConnection, created_by: str, namespace: str | None) -> tuple[int, int]:
    """Live (not expired) subscriptions created by ``created_by``, and live ones in ``namespace``
    (``None``: the cluster-wide ones).

    Takes a transaction-scoped advisory lock first, so concurrent creations are counted one
    after another: call it in the transaction that inserts (or moves) the subscription.
    """
    await lock_transaction(conn, QUOTA_LOCK)
    live = SubscriptionRow.state != "expired"
    in_namespace = (
        SubscriptionRow.namespace.is_(None) if namespace is None else SubscriptionRow.namespace == namespace
    )
    by_user = (
        select(func.count())
        .select_from(SubscriptionRow)
        .where(live, SubscriptionRow.created_by == created_by)
    )
    there = select(func.count()).select_from(SubscriptionRow).where(live, in_namespace)
    row = (await conn.execute(select(by_user.scalar_subquery(), there.scalar_subquery()))).one()
    return int(row[0]), int(row[1])


async def update_subscription(
    conn: AsyncConnection, subscription_id: str, changes: Row
) -> SubscriptionRecord | None:
    """Apply ``changes`` (secrets encrypted when keys are set); ``None`` if there is no such subscription."""
    changes = _sealed(changes, subscription_id)
    row = (
        await conn.execute(
            update(SubscriptionRow)
            .where(SubscriptionRow.id == subscription_id)
            .values(changes)
            .returning(*SubscriptionRow.__table__.c)
        )
    ).first()
    return _subscription(row) if row else None


async def delete_subscription(conn: AsyncConnection, subscription_id: str) -> bool:
    """Delete a subscription with its deliveries and notices; whether it existed."""
    result = await conn.execute(
        delete(SubscriptionRow).where(SubscriptionRow.id == subscription_id).returning(SubscriptionRow.id)
    )
    return result.first() is not None


async def active_subscriptions(conn: AsyncConnection) -> list[SubscriptionRecord]:
    """Every active subscription (the caller checks ``expires_at``)."""
    rows = await conn.execute(select(*SubscriptionRow.__table__.c).where(SubscriptionRow.state == "active"))
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
        update(SubscriptionRow)
        .where(SubscriptionRow.id == subscription_id, SubscriptionRow.state == "active")
        .values(state="expired", fired_at=now, updated_at=now)
        .returning(SubscriptionRow.id)
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


RECHECKED = ("active", "suspended")
"""States whose creator is re-checked: an active subscription may be suspended, a suspended one resumed."""


async def rechecked_subscriptions(conn: AsyncConnection) -> list[SubscriptionRecord]:
    """Every active or suspended subscription (:data:`RECHECKED`), by id."""
    rows = await conn.execute(
        select(*SubscriptionRow.__table__.c)
        .where(SubscriptionRow.state.in_(RECHECKED))
        .order_by(SubscriptionRow.id)
    )
    return [_subscription(row) for row in rows]


async def suspend(conn: AsyncConnection, reasons: Mapping[str, str], now: datetime) -> list[str]:
    """Suspend the subscriptions ``reasons`` names (id → why) that are still active, each with a
    notice; the ids suspended."""
    return await _move(conn, reasons, now, suspending=True)


async def resume(conn: AsyncConnection, ids: Mapping[str, str], now: datetime) -> list[str]:
    """Make the subscriptions ``ids`` names (id → why) active again if they are still suspended,
    each with a notice; the ids resumed (the caller makes their pending deliveries due)."""
    return await _move(conn, ids, now, suspending=False)


async def _move(
    conn: AsyncConnection, reasons: Mapping[str, str], now: datetime, *, suspending: bool
) -> list[str]:
    """Suspend (or resume) the subscriptions ``reasons`` names that are still active (suspended),
    each with a notice saying why; the ids moved."""
    before, after = ("active", "suspended") if suspending else ("suspended", "active")
    done: list[str] = []
    for subscription_id, reason in sorted(reasons.items()):
        row = await conn.execute(
            update(SubscriptionRow)
            .where(SubscriptionRow.id == subscription_id, SubscriptionRow.state == before)
            .values(
                state=after,
                updated_at=now,
                disabled_at=now if suspending else None,
                disabled_reason=reason if suspending else None,
            )
            .returning(SubscriptionRow.id)
        )
        if row.first() is not None:
            done.append(subscription_id)
    kind = "suspended" if suspending else "resumed"
    await add_notices(
        conn, [{"subscription_id": i, "kind": kind, "message": reasons[i], "at": now} for i in done]
    )
    return done


async def count_by_state(conn: AsyncConnection) -> list[tuple[str, str, int]]:
    """(state, channel, count) of every subscription."""
    rows = await conn.execute(
        select(SubscriptionRow.state, SubscriptionRow.channel, func.count())
        .group_by(SubscriptionRow.state, SubscriptionRow.channel)
        .order_by(SubscriptionRow.state, SubscriptionRow.channel)
    )
    return [(str(state), str(channel), int(count)) for state, channel, count in rows]
