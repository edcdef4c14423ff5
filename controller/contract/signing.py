"""Standard Webhooks signing, and the verification helper we hand to receivers.

A webhook carries three headers (https://www.standardwebhooks.com, spec 1.0.0):

- ``webhook-id``: the message id, stable across retries — the receiver's idempotency key;
- ``webhook-timestamp``: integer Unix seconds of this attempt (refreshed on every retry);
- ``webhook-signature``: space-separated ``v1,<base64 HMAC-SHA256>`` signatures of
  ``"{id}.{timestamp}.{body}"``, one per valid secret, so a secret can be rotated without
  downtime (the old one keeps verifying until it expires).

Secrets are ``whsec_`` + base64 of 32 random bytes. The module depends on the standard
library only, so a receiver can copy it as is. Every failure raises the one error type,
:class:`WebhookVerificationError`, whose message names the reason::

    from controller.contract.signing import verify
    event = verify(secret, body, request.headers)   # raises WebhookVerificationError
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Iterable, Mapping
from secrets import token_bytes
from typing import Any

__all__ = ["TOLERANCE_S", "WebhookVerificationError", "generate_secret", "sign", "signed_headers", "verify"]

SECRET_PREFIX = "whsec_"
TOLERANCE_S = 300
"""A timestamp further than this from the receiver's clock is rejected: a replay window of ±5 min."""


class WebhookVerificationError(Exception):
    """The request is not a valid, fresh webhook signed with the secret; the message says why."""


def generate_secret(size: int = 32) -> str:
    """A new random signing secret, ``whsec_`` + base64 (24 to 64 bytes per the spec)."""
    if not 24 <= size <= 64:
        raise ValueError("a webhook secret has 24 to 64 bytes")
    return SECRET_PREFIX + base64.b64encode(token_bytes(size)).decode()


def _key(secret: str) -> bytes:
    try:
        encoded = secret.removeprefix(SECRET_PREFIX)
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WebhookVerificationError("the secret is not whsec_ followed by base64") from exc
    if not key:
        raise WebhookVerificationError("the secret is empty")
    return key


def _mac(key: bytes, msg_id: str, timestamp: int, body: bytes) -> bytes:
    return hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` signature of ``body`` sent as ``msg_id`` at ``timestamp``."""
    if "." in msg_id or not msg_id:
        raise ValueError("a webhook id must be non-empty and contain no '.'")
    return "v1," + base64.b64encode(_mac(_key(secret), msg_id, timestamp, body)).decode()


def signed_headers(
    secrets: Iterable[str], msg_id: str, body: bytes, timestamp: int | None = None
) -> dict[str, str]:
    """The three ``webhook-*`` headers, signed with every secret given (current first)."""
    ts = int(time.time()) if timestamp is None else timestamp
    signatures = " ".join(sign(secret, msg_id, ts, body) for secret in secrets)
    if not signatures:
        raise ValueError("at least one secret is needed to sign a webhook")
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": signatures}


def verify(
    secret: str,
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    now: float | None = None,
    tolerance_s: int = TOLERANCE_S,
) -> Any:
    """Check the headers of a received webhook and return its JSON body, parsed.

    Accepts the request if any ``v1`` signature in ``webhook-signature`` matches (compared in
    constant time) and the timestamp is within ``tolerance_s`` of ``now``.
    """
    raw = body.encode() if isinstance(body, str) else body
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id, stamp, signatures = (lowered.get(f"webhook-{h}") for h in ("id", "timestamp", "signature"))
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature header")
    try:
        timestamp = int(stamp)
    except ValueError as exc:
        raise WebhookVerificationError(f"webhook-timestamp {stamp!r} is not integer Unix seconds") from exc
    skew = (time.time() if now is None else now) - timestamp
    if skew > tolerance_s:
        raise WebhookVerificationError(f"message timestamp too old ({int(skew)} s)")
    if skew < -tolerance_s:
        raise WebhookVerificationError(f"message timestamp too new ({int(-skew)} s ahead)")
    expected = _mac(_key(secret), msg_id, timestamp, raw)
    for candidate in signatures.split(" "):
        version, _, encoded = candidate.partition(",")
        if version != "v1":
            continue
        try:
            given = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(expected, given):
            try:
                return json.loads(raw)
            except ValueError as exc:
                raise WebhookVerificationError("the signed body is not JSON") from exc
    raise WebhookVerificationError("no matching v1 signature")
