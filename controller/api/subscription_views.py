"""How a subscription and its deliveries are shown to a caller: the answers' models built from
the store's records, with what only the creator may see taken out.

A webhook's URL is shown whole only to its creator (chat systems put credentials in it); everyone
else sees its scheme and host (:func:`fields_of`), and the delivery log's error texts are cut
alike (:func:`masker`). The signing secret is never part of a view.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

from controller.api import models
from controller.api.auth import Principal
from controller.contract.redaction import REDACTED
from controller.store import outbox
from controller.store.models import DeliveryAttemptRow, DeliveryRow
from controller.store.subscriptions import SubscriptionRecord

__all__ = ["delivery_view", "fields_of", "masker", "view"]


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: what callers other than its creator see."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def fields_of(sub: SubscriptionRecord, principal: Principal) -> dict[str, Any]:
    """The public fields of ``sub`` as ``principal`` may see them (never the secret)."""
    shown = {name: getattr(sub, name) for name in models.Subscription.model_fields}
    if sub.url is not None and sub.created_by != principal.username:
        shown["url"] = _origin(sub.url)
    return shown


def view(sub: SubscriptionRecord, principal: Principal) -> models.Subscription:
    """``sub`` as ``principal`` sees it."""
    return models.Subscription.model_validate(fields_of(sub, principal))


def masker(sub: SubscriptionRecord, principal: Principal) -> Callable[[str | None], str | None]:
    """What the delivery log's error texts become for ``principal``: as in :func:`fields_of`, callers
    other than the creator see the webhook URL only to its origin, so its path and query (often the
    endpoint's own secret, as in Slack's) are cut from errors too (an endpoint's 404 page, a client
    error, may quote them)."""
    if sub.url is None or sub.created_by == principal.username:
        return lambda text: text
    origin, parts = _origin(sub.url), urlsplit(sub.url)
    rest = parts.path + (f"?{parts.query}" if parts.query else "")
    shown = {sub.url: origin, rest: REDACTED, parts.path: REDACTED, parts.query: REDACTED}
    shown |= {unquote(hidden): mask for hidden, mask in shown.items()}
    hidden = sorted((h for h in shown if len(h) > 1), key=len, reverse=True)  # "/" hides nothing

    def mask(text: str | None) -> str | None:
        if text:
            for part in hidden:
                text = text.replace(part, shown[part])
        return text

    return mask


def delivery_view(
    delivery: DeliveryRow,
    attempts: list[DeliveryAttemptRow],
    mask: Callable[[str | None], str | None],
) -> models.Delivery:
    """``delivery`` and its ``attempts`` as the caller sees them, their error texts through ``mask``."""
    return models.Delivery(
        id=delivery.id,
        cursor=delivery.seq,
        subscription_id=delivery.subscription_id,
        channel=delivery.channel,
        event_type=delivery.event_type,
        job=models.DeliveryJob(namespace=delivery.namespace, name=delivery.job_name, uid=delivery.job_uid),
        status=delivery.status,
        attempts=delivery.attempts,
        next_attempt_at=(
            delivery.next_attempt_at
            if delivery.status == "pending" and not outbox.is_parked(delivery.next_attempt_at)
            else None
        ),
        event_at=delivery.event_at,
        created_at=delivery.created_at,
        finished_at=delivery.finished_at,
        last_status_code=delivery.last_status_code,
        last_error=mask(delivery.last_error),
        last_latency_ms=delivery.last_latency_ms,
        attempt_log=[
            models.DeliveryAttempt.model_validate(a).model_copy(update={"error": mask(a.error)})
            for a in attempts
        ],
    )
