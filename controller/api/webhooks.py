"""Notification subscriptions, their delivery log, and redelivery (``/api/v1/webhooks…``).

One resource for both channels: ``channel: webhook`` (a URL, signed with a per-subscription
secret shown once, at creation or rotation) or ``channel: email`` (recipients). Every
route goes through the auth seam: the caller must be allowed to read the subscription's
namespace; a cluster-wide subscription (no namespace) needs access to every namespace.

Bad input is a 4xx that says what is wrong — an unknown event type or rule, a label
selector that does not parse, a URL the SSRF guard refuses (422), a redelivery of a
delivery still pending (409) — never a 5xx. Queries live in :mod:`controller.store.subscriptions`
and :mod:`controller.store.outbox`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from controller.api.auth import Principal, current_principal, require_namespace, visible_namespaces
from controller.api.deps import engine_of
from controller.contract.egress import EgressPolicy, EgressRefusedError, Resolver, system_resolver
from controller.contract.notifications import Channel, DeliveryStatus, FilterError, Filters
from controller.contract.settings import NotifySettings
from controller.contract.signing import generate_secret
from controller.store import outbox, subscriptions
from controller.store.models import Delivery, DeliveryAttempt
from controller.store.subscriptions import SubscriptionRecord

Clock = Callable[[], datetime]
Caller = Annotated[Principal, Depends(current_principal)]

MAX_RECIPIENTS = 50
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_ADDRESS = re.compile(r"^[^@\s,<>]+@[^@\s,<>]+\.[^@\s,<>]+$")
_SUBSCRIPTION_ID = re.compile(r"^sub_[0-9a-f]{32}$")
_DELIVERY_ID = re.compile(r"^msg_[0-9a-f]{32}$")
_MAX_CURSOR = 2**63 - 1
_PUBLIC_FIELDS = (
    "id",
    "channel",
    "state",
    "namespace",
    "job_name",
    "label_selector",
    "event_types",
    "rules",
    "severities",
    "url",
    "recipients",
    "one_shot",
    "expires_at",
    "fired_at",
    "description",
    "created_by",
    "created_at",
    "updated_at",
    "failing_since",
    "disabled_at",
    "disabled_reason",
    "previous_secret_until",
)
_FILTER_FIELDS = ("namespace", "job_name", "label_selector", "event_types", "rules", "severities")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubscriptionIn(_Body):
    """A new subscription."""

    channel: Channel = "webhook"
    url: str | None = Field(default=None, max_length=2048, description="Webhook endpoint (http/https).")
    recipients: list[str] = Field(default_factory=list, description="Email addresses (channel email).")
    namespace: str | None = Field(default=None, description="Only jobs in this namespace; unset: all.")
    job_name: str | None = Field(default=None, description="Only jobs of this name.")
    label_selector: str | None = Field(
        default=None, max_length=1024, description="e.g. team=nlp,tier!=dev,gpu"
    )
    event_types: list[str] = Field(
        default_factory=list,
        description="e.g. job.failed, finding.*; empty: all (finding.* when rules or severities are set).",
    )
    rules: list[str] = Field(default_factory=list, description="Finding rules, e.g. oom; empty: all.")
    severities: list[str] = Field(default_factory=list, description="Finding severities; empty: all.")
    one_shot: bool = Field(default=False, description="Expire after the first matching event.")
    expires_at: datetime | None = Field(default=None, description="Stop matching after this time.")
    description: str = Field(default="", max_length=1000)


class SubscriptionPatch(_Body):
    """Changes to a subscription; ``state`` re-enables (``active``) or pauses (``disabled``) it."""

    url: str | None = Field(default=None, max_length=2048)
    recipients: list[str] | None = None
    namespace: str | None = None
    job_name: str | None = None
    label_selector: str | None = None
    event_types: list[str] | None = None
    rules: list[str] | None = None
    severities: list[str] | None = None
    one_shot: bool | None = None
    expires_at: datetime | None = None
    description: str | None = Field(default=None, max_length=1000)
    state: Literal["active", "disabled"] | None = None


def _view(sub: SubscriptionRecord) -> dict[str, Any]:
    return {name: getattr(sub, name) for name in _PUBLIC_FIELDS}


def _delivery_view(delivery: Delivery, attempts: list[DeliveryAttempt]) -> dict[str, Any]:
    return {
        "id": delivery.id,
        "cursor": delivery.seq,
        "subscription_id": delivery.subscription_id,
        "channel": delivery.channel,
        "event_type": delivery.event_type,
        "job": {"namespace": delivery.namespace, "name": delivery.job_name, "uid": delivery.job_uid},
        "status": delivery.status,
        "attempts": delivery.attempts,
        "next_attempt_at": (
            delivery.next_attempt_at
            if delivery.status == "pending" and not outbox.is_parked(delivery.next_attempt_at)
            else None
        ),
        "event_at": delivery.event_at,
        "created_at": delivery.created_at,
        "finished_at": delivery.finished_at,
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "last_latency_ms": delivery.last_latency_ms,
        "attempt_log": [
            {
                "attempt": a.attempt,
                "at": a.at,
                "outcome": a.outcome,
                "status_code": a.status_code,
                "latency_ms": a.latency_ms,
                "error": a.error,
            }
            for a in attempts
        ],
    }


async def _authorize(request: Request, principal: Principal, namespace: str | None) -> None:
    if namespace is not None:
        await require_namespace(request, principal, namespace)
    elif await visible_namespaces(request, principal) is not None:
        raise HTTPException(
            403,
            "a subscription without a namespace covers every namespace; it needs read access to all of them",
        )


def _unprocessable(message: str) -> HTTPException:
    return HTTPException(422, message)


def _reject_nul(fields: dict[str, Any]) -> None:
    """PostgreSQL text cannot hold NUL: say so (422) instead of failing at the database."""
    for name, value in fields.items():
        texts = value if isinstance(value, list) else [value]
        if any(isinstance(t, str) and "\x00" in t for t in texts):
            raise _unprocessable(f"{name} may not contain NUL characters")


class _Validator:
    """Checks a subscription's fields as they would be stored; raises 422 with the reason."""

    def __init__(self, settings: NotifySettings, policy: EgressPolicy, clock: Clock) -> None:
        self._settings = settings
        self._policy = policy
        self._clock = clock

    async def check(self, fields: dict[str, Any], url_changed: bool = True) -> dict[str, Any]:
        namespace, job_name = fields.get("namespace"), fields.get("job_name")
        if namespace is not None and not _NAMESPACE.match(namespace):
            raise _unprocessable(f"namespace {namespace!r} is not a valid Kubernetes namespace name")
        if job_name is not None and not _NAME.match(job_name):
            raise _unprocessable(f"job_name {job_name!r} is not a valid Kubernetes object name")
        if fields.get("label_selector") == "":
            fields["label_selector"] = None
        if (fields.get("rules") or fields.get("severities")) and not fields.get("event_types"):
            fields["event_types"] = ["finding.*"]
        try:
            filters = Filters.of(
                namespace,
                job_name,
                fields.get("label_selector"),
                fields.get("event_types") or (),
                fields.get("rules") or (),
                fields.get("severities") or (),
            )
        except FilterError as exc:
            raise _unprocessable(str(exc)) from exc
        fields["event_types"] = sorted(filters.event_types)
        fields["rules"] = sorted(filters.rules)
        fields["severities"] = sorted(filters.severities)
        expires = fields.get("expires_at")
        if expires is not None and (expires.tzinfo is None or expires <= self._clock()):
            raise _unprocessable(
                "expires_at must be a future time with a timezone (e.g. 2026-12-01T00:00:00Z)"
            )
        if fields["channel"] == "webhook":
            await self._webhook(fields, url_changed)
        else:
            self._email(fields)
        return fields

    async def _webhook(self, fields: dict[str, Any], url_changed: bool) -> None:
        if fields.get("recipients"):
            raise _unprocessable("recipients belong to channel email; a webhook has a url")
        url = fields.get("url")
        if not url:
            raise _unprocessable("a webhook subscription needs a url")
        if url_changed:
            try:
                await self._policy.check(url)
            except EgressRefusedError as exc:
                raise _unprocessable(str(exc)) from exc

    def _email(self, fields: dict[str, Any]) -> None:
        if not self._settings.smtp.host:
            raise _unprocessable("email notifications are not configured on this server (notify.smtp.host)")
        if fields.get("url"):
            raise _unprocessable("an email subscription has recipients, not a url")
        recipients = list(dict.fromkeys(fields.get("recipients") or ()))
        if not 1 <= len(recipients) <= MAX_RECIPIENTS:
            raise _unprocessable(f"an email subscription needs 1 to {MAX_RECIPIENTS} recipients")
        bad = [r for r in recipients if not _ADDRESS.match(r)]
        if bad:
            raise _unprocessable(f"not email addresses: {bad}")
        fields["recipients"] = recipients


class _NotificationsApi:
    """The route handlers, over one set of settings, SSRF policy and clock."""

    def __init__(self, settings: NotifySettings, resolver: Resolver, clock: Clock) -> None:
        self._settings = settings
        self._now = clock
        self._validator = _Validator(settings, EgressPolicy(settings.allow_cidrs, resolver), clock)

    async def _load(self, request: Request, principal: Principal, subscription_id: str) -> SubscriptionRecord:
        sub = None
        if _SUBSCRIPTION_ID.match(subscription_id):
            async with engine_of(request).connect() as conn:
                sub = await subscriptions.get_subscription(conn, subscription_id)
        if sub is None:
            raise HTTPException(404, f"no subscription with id {subscription_id!r}")
        await _authorize(request, principal, sub.namespace)
        return sub

    async def create(self, body: SubscriptionIn, request: Request, principal: Caller) -> dict[str, Any]:
        """Subscribe; a webhook's signing secret is in this answer and never shown again."""
        _reject_nul(body.model_dump())
        await _authorize(request, principal, body.namespace)
        fields = await self._validator.check(body.model_dump())
        at = self._now()
        secret = generate_secret() if body.channel == "webhook" else None
        unset = ("previous_secret", "previous_secret_until", "fired_at", "failing_since", "disabled_at")
        row = {
            **fields,
            **dict.fromkeys((*unset, "disabled_reason")),
            "id": subscriptions.new_id("sub"),
            "state": "active",
            "secret": secret,
            "created_by": principal.username,
            "created_at": at,
            "updated_at": at,
        }
        async with engine_of(request).begin() as conn:
            sub = await subscriptions.insert_subscription(conn, row)
        return {**_view(sub), "secret": secret}

    async def list_(
        self,
        request: Request,
        principal: Caller,
        namespace: str | None = None,
        channel: Channel | None = None,
        state: Literal["active", "disabled", "expired"] | None = None,
        after: Annotated[
            str | None, Query(max_length=64, description="The last id of the page before.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """Subscriptions the caller may see, by id; page with ``after=<next>``."""
        if namespace is not None and not _NAMESPACE.match(namespace):
            raise _unprocessable(f"namespace {namespace!r} is not a valid Kubernetes namespace name")
        if after is not None and not _SUBSCRIPTION_ID.match(after):
            raise _unprocessable(f"after {after!r} is not a subscription id (the 'next' of the page before)")
        if namespace is not None:
            await require_namespace(request, principal, namespace)
            visible: frozenset[str] | None = frozenset({namespace})
        else:
            visible = await visible_namespaces(request, principal)
        async with engine_of(request).connect() as conn:
            subs = await subscriptions.list_subscriptions(
                conn,
                visible=visible,
                namespace=namespace,
                channel=channel,
                state=state,
                after=after,
                limit=limit,
            )
        return {"items": [_view(s) for s in subs], "next": subs[-1].id if len(subs) == limit else None}

    async def get(self, subscription_id: str, request: Request, principal: Caller) -> dict[str, Any]:
        """One subscription, with its recent notices (e.g. why it was disabled)."""
        sub = await self._load(request, principal, subscription_id)
        async with engine_of(request).connect() as conn:
            notices = await subscriptions.notices_of(conn, sub.id)
        return {
            **_view(sub),
            "notices": [{"kind": n.kind, "message": n.message, "at": n.at} for n in notices],
        }

    async def patch(
        self, subscription_id: str, body: SubscriptionPatch, request: Request, principal: Caller
    ) -> dict[str, Any]:
        """Change filters, target or state; ``state: active`` re-enables a disabled subscription."""
        changes = body.model_dump(exclude_unset=True)
        _reject_nul(changes)
        sub = await self._load(request, principal, subscription_id)
        if "namespace" in changes and changes["namespace"] != sub.namespace:
            await _authorize(request, principal, changes["namespace"])
        state = changes.pop("state", None)
        merged = {
            name: getattr(sub, name)
            for name in (*_FILTER_FIELDS, "channel", "url", "recipients", "expires_at")
        }
        merged.update({k: v for k, v in changes.items() if k in merged})
        checked = await self._validator.check(merged, url_changed=changes.get("url", sub.url) != sub.url)
        at = self._now()
        values = {**changes, **{k: checked[k] for k in merged if k != "channel"}, "updated_at": at}
        if state == "active" and sub.state != "active":
            cleared = ("failing_since", "disabled_at", "disabled_reason", "fired_at")
            values |= {"state": "active", **dict.fromkeys(cleared)}
        elif state == "disabled" and sub.state != "disabled":
            values |= {
                "state": "disabled",
                "disabled_at": at,
                "disabled_reason": f"disabled by {principal.username}",
            }
        async with engine_of(request).begin() as conn:
            updated = await subscriptions.update_subscription(conn, sub.id, values)
            if updated is not None and values.get("state") == "active":
                await outbox.resume(conn, sub.id, at)
        if updated is None:
            raise HTTPException(404, f"no subscription with id {subscription_id!r}")
        return _view(updated)

    async def delete(self, subscription_id: str, request: Request, principal: Caller) -> Response:
        """Unsubscribe; pending deliveries and the delivery log go too."""
        sub = await self._load(request, principal, subscription_id)
        async with engine_of(request).begin() as conn:
            await subscriptions.delete_subscription(conn, sub.id)
        return Response(status_code=204)

    async def rotate(self, subscription_id: str, request: Request, principal: Caller) -> dict[str, Any]:
        """A new signing secret (shown once); the old one keeps signing for ``notify.rotation_overlap_s``."""
        sub = await self._load(request, principal, subscription_id)
        if sub.channel != "webhook":
            raise HTTPException(409, "only webhook subscriptions have a signing secret")
        at, secret = self._now(), generate_secret()
        until = at + timedelta(seconds=self._settings.rotation_overlap_s)
        async with engine_of(request).begin() as conn:
            await subscriptions.update_subscription(
                conn,
                sub.id,
                {
                    "secret": secret,
                    "previous_secret": sub.secret,
                    "previous_secret_until": until,
                    "updated_at": at,
                },
            )
        return {"id": sub.id, "secret": secret, "previous_secret_valid_until": until}

    async def deliveries(
        self,
        subscription_id: str,
        request: Request,
        principal: Caller,
        status: DeliveryStatus | None = None,
        before: Annotated[
            int | None, Query(ge=1, le=_MAX_CURSOR, description="The cursor of the last delivery seen.")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """The delivery log, newest first: status, attempts with status codes and latencies."""
        sub = await self._load(request, principal, subscription_id)
        async with engine_of(request).connect() as conn:
            rows = await outbox.list_deliveries(conn, sub.id, status=status, before=before, limit=limit)
            attempts = await outbox.attempts_of(conn, [d.seq for d in rows])
        return {
            "items": [_delivery_view(d, attempts[d.seq]) for d in rows],
            "next": rows[-1].seq if len(rows) == limit else None,
        }

    async def redeliver(self, delivery_id: str, request: Request, principal: Caller) -> dict[str, Any]:
        """Send a delivered or dead delivery again, same ``webhook-id``, with a fresh retry schedule."""
        delivery = None
        if _DELIVERY_ID.match(delivery_id):
            async with engine_of(request).connect() as conn:
                delivery = await outbox.get_delivery(conn, delivery_id)
        if delivery is None:
            raise HTTPException(404, f"no delivery with id {delivery_id!r}")
        sub = await self._load(request, principal, delivery.subscription_id)
        if sub.state == "disabled":
            raise HTTPException(409, f"subscription {sub.id} is disabled; PATCH it to state active first")
        async with engine_of(request).begin() as conn:
            queued = await outbox.redeliver(conn, delivery_id, self._now())
            attempts = await outbox.attempts_of(conn, [queued.seq]) if queued else {}
        if queued is None:
            raise HTTPException(409, f"delivery {delivery_id} is already pending; it will be attempted again")
        return _delivery_view(queued, attempts[queued.seq])


def build_router(
    settings: NotifySettings, *, resolver: Resolver = system_resolver, clock: Clock | None = None
) -> APIRouter:
    """The notifications API over ``settings``; ``resolver`` and ``clock`` are seams for tests."""
    api = _NotificationsApi(settings, resolver, clock or (lambda: datetime.now(UTC)))
    router = APIRouter(prefix="/api/v1", tags=["notifications"])
    for method, path, handler, status in (
        ("POST", "/webhooks", api.create, 201),
        ("GET", "/webhooks", api.list_, 200),
        ("GET", "/webhooks/{subscription_id}", api.get, 200),
        ("PATCH", "/webhooks/{subscription_id}", api.patch, 200),
        ("DELETE", "/webhooks/{subscription_id}", api.delete, 204),
        ("POST", "/webhooks/{subscription_id}/rotate-secret", api.rotate, 200),
        ("GET", "/webhooks/{subscription_id}/deliveries", api.deliveries, 200),
        ("POST", "/deliveries/{delivery_id}/redeliver", api.redeliver, 202),
    ):
        router.add_api_route(path, handler, methods=[method], status_code=status)
    return router
