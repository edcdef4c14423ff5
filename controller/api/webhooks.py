"""Notification subscriptions, their delivery log, and redelivery (``/api/v1/webhooks…``).

One resource for both channels: ``channel: webhook`` (a URL, signed with a per-subscription
secret shown once, at creation or rotation) or ``channel: email`` (recipients).

Who may do what, through the auth seam:

- **read** (list, get, the delivery log): read access to the subscription's namespace (a
  cluster-wide subscription, without one: to every namespace). A subscription the caller may
  not read is answered 404, exactly like one that does not exist;
- **change** (patch, delete, rotate the secret, redeliver): its creator, or someone allowed to
  update MPIJobs or TrainJobs in its namespace (cluster-wide: in every namespace); anyone else
  who can read it gets 403;
- **create**: read access to the namespace it covers, within the quotas
  (:class:`~controller.api.limits.SubscriptionQuotas`: per creator and per namespace, 429);
  the creator's identity (uid, groups, extra attributes) is kept with it, and their read
  access is re-checked for as long as it lives (:mod:`controller.api.rechecks`): ``suspended``
  while they have lost it;
- a webhook's **URL** is shown whole only to its creator (chat systems put credentials in
  it); everyone else sees its scheme and host.

Bad input is a 4xx that says what is wrong — an unknown event type or rule, a label
selector that does not parse, a URL the SSRF guard refuses (422), a redelivery of a
delivery still pending (409) — never a 5xx. Every field is bounded in length before it is
checked, and every check is linear in its input. Queries live in
:mod:`controller.store.subscriptions` and :mod:`controller.store.outbox`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal
from urllib.parse import unquote, urlsplit

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.api import models
from controller.api.auth import (
    Principal,
    current_principal,
    may_read,
    may_subscribe,
    may_update,
    visible_namespaces,
)
from controller.api.deps import engine_of
from controller.api.limits import DEFAULT_QUOTAS, SubscriptionQuotas
from controller.api.paging import MAX_SEQ, Cursor, Keyset, Limit, by_sequence, page_of
from controller.api.params import (
    AUTHENTICATED,
    Instant,
    JobName,
    Namespace,
    NamespaceQuery,
    errors,
    known_query_only,
)
from controller.api.rechecks import creator_of, lost_access
from controller.contract.clock import Clock
from controller.contract.cloudevents import Format
from controller.contract.egress import EgressPolicy, EgressRefusedError, Resolver, system_resolver
from controller.contract.notifications import (
    Channel,
    DeliveryStatus,
    FilterError,
    Filters,
    SubscriptionState,
)
from controller.contract.redaction import REDACTED
from controller.contract.settings import NotifySettings
from controller.contract.signing import generate_secret
from controller.store import outbox, subscriptions
from controller.store.models import Delivery, DeliveryAttempt
from controller.store.subscriptions import SubscriptionRecord

Caller = Annotated[Principal, Depends(current_principal)]

# Bounds of every field a client sends (characters, or items of a list).
MAX_URL = 2048
MAX_DESCRIPTION = 1024
MAX_SELECTOR = 1024
MAX_SELECTOR_REQUIREMENTS = 32
MAX_ADDRESS = 254
"""An email address (RFC 5321's limit on a forward path)."""
MAX_RECIPIENTS = 50
MAX_EVENT_PATTERNS = 16
MAX_RULES = 32
MAX_SEVERITIES = 8
MAX_ID = 64

_SUBSCRIPTION_ID = re.compile(r"sub_[0-9a-f]{32}")
_DELIVERY_ID = re.compile(r"msg_[0-9a-f]{32}")
_FILTER_FIELDS = ("namespace", "job_name", "label_selector", "event_types", "rules", "severities")

Url = Annotated[str, StringConstraints(max_length=MAX_URL)]
Address = Annotated[str, StringConstraints(max_length=MAX_ADDRESS)]
Selector = Annotated[str, StringConstraints(max_length=MAX_SELECTOR)]
Description = Annotated[str, StringConstraints(max_length=MAX_DESCRIPTION)]
EventPattern = Annotated[str, StringConstraints(max_length=32)]
RuleName = Annotated[str, StringConstraints(max_length=64)]
SeverityName = Annotated[str, StringConstraints(max_length=16)]
SubscriptionId = Annotated[str, Path(max_length=MAX_ID, description="A subscription id (`sub_…`).")]
DeliveryId = Annotated[str, Path(max_length=MAX_ID, description="A delivery id (`msg_…`).")]

_URL_DOC = f"Webhook endpoint (http/https, at most {MAX_URL} characters)."
_RECIPIENTS_DOC = (
    f"Email addresses (channel email): 1 to {MAX_RECIPIENTS}, each at most {MAX_ADDRESS} characters."
)
_SELECTOR_DOC = (
    f"e.g. team=nlp,tier!=dev,gpu (at most {MAX_SELECTOR} characters and {MAX_SELECTOR_REQUIREMENTS} "
    "requirements)"
)

_FORMAT_DOC = (
    "What a webhook receives: `standard` (one JSON event), `cloudevents` (CloudEvents 1.0, binary "
    "mode: ce-* headers, the data as body) or `cloudevents-structured` (application/cloudevents+json); "
    "every format is signed alike."
)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SubscriptionIn(_Body):
    """A new subscription."""

    channel: Channel = "webhook"
    url: Url | None = Field(default=None, description=_URL_DOC)
    format: Format = Field(default="standard", description=_FORMAT_DOC)
    recipients: list[Address] = Field(
        default_factory=list, max_length=MAX_RECIPIENTS, description=_RECIPIENTS_DOC
    )
    namespace: Namespace | None = Field(default=None, description="Only jobs in this namespace; unset: all.")
    job_name: JobName | None = Field(default=None, description="Only jobs of this name.")
    label_selector: Selector | None = Field(default=None, description=_SELECTOR_DOC)
    event_types: list[EventPattern] = Field(
        default_factory=list,
        max_length=MAX_EVENT_PATTERNS,
        description="e.g. job.failed, finding.*; empty: all (finding.* when rules or severities are set).",
    )
    rules: list[RuleName] = Field(
        default_factory=list, max_length=MAX_RULES, description="Finding rules, e.g. oom; empty: all."
    )
    severities: list[SeverityName] = Field(
        default_factory=list, max_length=MAX_SEVERITIES, description="Finding severities; empty: all."
    )
    one_shot: bool = Field(default=False, description="Expire after the first matching event.")
    expires_at: Instant | None = Field(default=None, description="Stop matching after this time (RFC 3339).")
    description: Description = ""


class SubscriptionPatch(_Body):
    """Changes to a subscription; ``state`` re-enables (``active``) or pauses (``disabled``) it.

    A ``suspended`` subscription (its creator lost read access where it points) becomes active
    only if its creator may read there again; a change by its creator records who they are now."""

    url: Url | None = Field(default=None, description=_URL_DOC)
    format: Format | None = Field(default=None, description=_FORMAT_DOC)
    recipients: list[Address] | None = Field(
        default=None, max_length=MAX_RECIPIENTS, description=_RECIPIENTS_DOC
    )
    namespace: Namespace | None = None
    job_name: JobName | None = None
    label_selector: Selector | None = Field(default=None, description=_SELECTOR_DOC)
    event_types: list[EventPattern] | None = Field(default=None, max_length=MAX_EVENT_PATTERNS)
    rules: list[RuleName] | None = Field(default=None, max_length=MAX_RULES)
    severities: list[SeverityName] | None = Field(default=None, max_length=MAX_SEVERITIES)
    one_shot: bool | None = None
    expires_at: Instant | None = None
    description: Description | None = None
    state: Literal["active", "disabled"] | None = None


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: what callers other than its creator see."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _fields(sub: SubscriptionRecord, principal: Principal) -> dict[str, Any]:
    """The public fields of ``sub`` as ``principal`` may see them (never the secret)."""
    shown = {name: getattr(sub, name) for name in models.Subscription.model_fields}
    if sub.url is not None and sub.created_by != principal.username:
        shown["url"] = _origin(sub.url)
    return shown


def _view(sub: SubscriptionRecord, principal: Principal) -> models.Subscription:
    return models.Subscription.model_validate(_fields(sub, principal))


def _masker(sub: SubscriptionRecord, principal: Principal) -> Callable[[str | None], str | None]:
    """What the delivery log's error texts become for ``principal``: as in :func:`_fields`, callers
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


def _delivery_view(
    delivery: Delivery,
    attempts: list[DeliveryAttempt],
    mask: Callable[[str | None], str | None],
) -> models.Delivery:
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


def _load_id(key: list[Any]) -> str:
    (subscription_id,) = key
    if not isinstance(subscription_id, str) or not _SUBSCRIPTION_ID.fullmatch(subscription_id):
        raise ValueError("not a subscription id")
    return subscription_id


SUBSCRIPTIONS = Keyset[str]("subscriptions", lambda sub_id: [sub_id], _load_id)
"""Subscriptions are ordered by id."""
DELIVERIES = by_sequence("deliveries")
"""Deliveries are ordered newest first by their place in the log."""


async def _authorize(request: Request, principal: Principal, namespace: str | None) -> None:
    """403 unless ``principal`` may read ``namespace``, which they named (so naming it reveals nothing)."""
    if namespace is not None:
        if not await may_read(request, principal, namespace):
            raise HTTPException(
                403, f"{principal.username} may not list MPIJobs or TrainJobs in namespace {namespace!r}"
            )
    elif not await may_read(request, principal, None):
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


_NOT_IN_ADDRESS = frozenset("@,<>")


def is_address(text: str) -> bool:
    """``local@domain.tld``: one ``@``, no whitespace, commas or angle brackets, a dot inside the
    domain. One pass over the text (no regular expression to backtrack)."""
    local, at, domain = text.partition("@")
    if not (local and at and domain):
        return False
    if any(char in _NOT_IN_ADDRESS or char.isspace() for part in (local, domain) for char in part):
        return False
    return "." in domain[1:-1]


def selector_requirements(selector: str) -> int:
    """How many comma-separated requirements ``selector`` has (commas inside ``( … )`` kept), in one pass."""
    depth, count = 0, 1
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            count += 1
    return count


class _Validator:
    """Checks a subscription's fields as they would be stored; raises 422 with the reason."""

    def __init__(
        self, settings: NotifySettings, policy: EgressPolicy, clock: Clock, quotas: SubscriptionQuotas
    ) -> None:
        self._settings = settings
        self._policy = policy
        self._clock = clock
        self._quotas = quotas

    async def check(self, fields: dict[str, Any], url_changed: bool = True) -> dict[str, Any]:
        namespace, job_name = fields.get("namespace"), fields.get("job_name")
        selector = fields.get("label_selector")
        if selector is not None and not selector.strip():
            fields["label_selector"] = selector = None
        if selector is not None and selector_requirements(selector) > MAX_SELECTOR_REQUIREMENTS:
            raise _unprocessable(f"label selector has more than {MAX_SELECTOR_REQUIREMENTS} requirements")
        if (fields.get("rules") or fields.get("severities")) and not fields.get("event_types"):
            fields["event_types"] = ["finding.*"]
        try:
            filters = Filters.of(
                namespace,
                job_name,
                selector,
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
            if fields.get("format", "standard") != "standard":
                raise _unprocessable("format applies to webhooks; an email subscription has none")
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
        most = self._quotas.recipients
        if not 1 <= len(recipients) <= most:
            raise _unprocessable(f"an email subscription needs 1 to {most} recipients")
        bad = [r for r in recipients if not is_address(r)]
        if bad:
            raise _unprocessable(f"not email addresses: {bad}")
        fields["recipients"] = recipients


def _no_subscription(subscription_id: str) -> HTTPException:
    return HTTPException(404, f"no subscription with id {subscription_id!r}")


def _no_delivery(delivery_id: str) -> HTTPException:
    return HTTPException(404, f"no delivery with id {delivery_id!r}")


class _NotificationsApi:
    """The route handlers, over one set of settings, SSRF policy, clock and quotas."""

    def __init__(
        self, settings: NotifySettings, resolver: Resolver, clock: Clock, quotas: SubscriptionQuotas
    ) -> None:
        self._settings = settings
        self._now = clock
        self._quotas = quotas
        policy = EgressPolicy(settings.allow_cidrs, resolver, settings.allow_ports)
        self._validator = _Validator(settings, policy, clock, quotas)

    async def _readable(
        self, request: Request, principal: Principal, subscription_id: str
    ) -> SubscriptionRecord:
        """The subscription, if ``principal`` may read it; 404 alike for none and for not readable."""
        sub = None
        if _SUBSCRIPTION_ID.fullmatch(subscription_id):
            async with engine_of(request).connect() as conn:
                sub = await subscriptions.get_subscription(conn, subscription_id)
        if sub is None or not await may_read(request, principal, sub.namespace):
            raise _no_subscription(subscription_id)
        return sub

    async def _changeable(
        self, request: Request, principal: Principal, subscription_id: str
    ) -> SubscriptionRecord:
        """The subscription, if ``principal`` may change it: 404 if they may not read it, 403 if
        they may read it but neither created it nor may update jobs in its namespace."""
        sub = await self._readable(request, principal, subscription_id)
        await _may_change(request, principal, sub.created_by, sub.namespace, sub.id)
        return sub

    async def _within_quotas(
        self, conn: AsyncConnection, created_by: str, namespace: str | None, *, one_more_for_user: bool
    ) -> None:
        """429 if one more live subscription of ``created_by`` in ``namespace`` would pass a quota."""
        by_user, in_namespace = await subscriptions.quota_usage(conn, created_by, namespace)
        if one_more_for_user and by_user >= self._quotas.per_user:
            raise HTTPException(
                429,
                f"{created_by} already has {by_user} subscriptions, the most one user may have "
                f"({self._quotas.per_user}); delete some first (expired ones do not count)",
            )
        if in_namespace >= self._quotas.per_namespace:
            where = f"namespace {namespace!r}" if namespace is not None else "cluster-wide"
            raise HTTPException(
                429,
                f"there are already {in_namespace} subscriptions {'in ' if namespace else ''}{where}, the "
                f"most allowed ({self._quotas.per_namespace}); delete some first (expired ones do not count)",
            )

    async def create(
        self, body: SubscriptionIn, request: Request, principal: Caller
    ) -> models.CreatedSubscription:
        """Subscribe; a webhook's signing secret is in this answer and never shown again."""
        _reject_nul(body.model_dump())
        await _authorize(request, principal, body.namespace)
        await _may_subscribe(request, principal, body.namespace)
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
            "creator": principal.identity(),
            "created_at": at,
            "updated_at": at,
        }
        async with engine_of(request).begin() as conn:
            await self._within_quotas(conn, principal.username, fields["namespace"], one_more_for_user=True)
            sub = await subscriptions.insert_subscription(conn, row)
        return models.CreatedSubscription.model_validate({**_fields(sub, principal), "secret": secret})

    async def list_(
        self,
        request: Request,
        principal: Caller,
        namespace: NamespaceQuery = None,
        channel: Channel | None = None,
        state: SubscriptionState | None = None,
        cursor: Cursor = None,
        after: Annotated[
            str | None,
            Query(
                max_length=MAX_ID,
                deprecated=True,
                description="Deprecated (use `cursor`): the `next` of the page before.",
            ),
        ] = None,
        limit: Limit = 50,
    ) -> models.SubscriptionPage:
        """Subscriptions the caller may see, by id; page with ``cursor=<next_cursor>``."""
        if cursor is not None and after is not None:
            raise HTTPException(400, "pass cursor, or the deprecated after, not both")
        if after is not None and not _SUBSCRIPTION_ID.fullmatch(after):
            raise _unprocessable(f"after {after!r} is not a subscription id (the 'next' of the page before)")
        position = SUBSCRIPTIONS.decode(cursor) if cursor is not None else after
        if namespace is not None:
            await _authorize(request, principal, namespace)
            visible: frozenset[str] | None = frozenset({namespace})
        else:
            visible = await visible_namespaces(request, principal)
        async with engine_of(request).connect() as conn:
            rows = await subscriptions.list_subscriptions(
                conn,
                visible=visible,
                namespace=namespace,
                channel=channel,
                state=state,
                after=position,
                limit=limit + 1,
            )
        page, next_cursor = page_of(rows, limit, SUBSCRIPTIONS, lambda sub: sub.id)
        return models.SubscriptionPage(
            items=[_view(s, principal) for s in page],
            next_cursor=next_cursor,
            next=page[-1].id if next_cursor else None,
        )

    async def get(
        self, subscription_id: SubscriptionId, request: Request, principal: Caller
    ) -> models.SubscriptionDetail:
        """One subscription, with its recent notices (e.g. why it was disabled)."""
        sub = await self._readable(request, principal, subscription_id)
        async with engine_of(request).connect() as conn:
            notices = await subscriptions.notices_of(conn, sub.id)
        return models.SubscriptionDetail.model_validate(
            {**_fields(sub, principal), "notices": [models.Notice.model_validate(n) for n in notices]}
        )

    async def patch(
        self, subscription_id: SubscriptionId, body: SubscriptionPatch, request: Request, principal: Caller
    ) -> models.Subscription:
        """Change filters, target or state; ``state: active`` re-enables a disabled subscription."""
        changes = body.model_dump(exclude_unset=True)
        _reject_nul(changes)
        sub = await self._changeable(request, principal, subscription_id)
        moving = "namespace" in changes and changes["namespace"] != sub.namespace
        if moving:
            await _authorize(request, principal, changes["namespace"])
            await _may_change(request, principal, sub.created_by, changes["namespace"], sub.id)
        state = changes.pop("state", None)
        merged = {
            name: getattr(sub, name)
            for name in (*_FILTER_FIELDS, "channel", "url", "recipients", "expires_at", "format")
        }
        merged.update({k: v for k, v in changes.items() if k in merged})
        checked = await self._validator.check(merged, url_changed=changes.get("url", sub.url) != sub.url)
        at = self._now()
        values = {**changes, **{k: checked[k] for k in merged if k != "channel"}, "updated_at": at}
        reviving = state == "active" and sub.state == "expired"
        if sub.created_by == principal.username:  # its creator, as they are now, is who is re-checked
            values["creator"] = principal.identity()
        if state == "active" and sub.state == "suspended":
            creator = principal if sub.created_by == principal.username else creator_of(sub)
            if not await may_read(request, creator, checked["namespace"]):
                raise HTTPException(409, f"subscription {sub.id} is {lost_access(sub)}")
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
            if moving or reviving:
                await self._within_quotas(
                    conn, sub.created_by, checked["namespace"], one_more_for_user=reviving
                )
            updated = await subscriptions.update_subscription(conn, sub.id, values)
            if updated is not None and values.get("state") == "active":
                await outbox.resume(conn, sub.id, at)
        if updated is None:
            raise _no_subscription(subscription_id)
        return _view(updated, principal)

    async def delete(self, subscription_id: SubscriptionId, request: Request, principal: Caller) -> Response:
        """Unsubscribe; pending deliveries and the delivery log go too."""
        sub = await self._changeable(request, principal, subscription_id)
        async with engine_of(request).begin() as conn:
            await subscriptions.delete_subscription(conn, sub.id)
        return Response(status_code=204)

    async def rotate(
        self, subscription_id: SubscriptionId, request: Request, principal: Caller
    ) -> models.RotatedSecret:
        """A new signing secret (shown once); the old one keeps signing for ``notify.rotation_overlap_s``."""
        sub = await self._changeable(request, principal, subscription_id)
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
        return models.RotatedSecret(id=sub.id, secret=secret, previous_secret_valid_until=until)

    async def deliveries(
        self,
        subscription_id: SubscriptionId,
        request: Request,
        principal: Caller,
        status: DeliveryStatus | None = None,
        cursor: Cursor = None,
        before: Annotated[
            int | None,
            Query(
                ge=1,
                le=MAX_SEQ,
                deprecated=True,
                description="Deprecated (use `cursor`): the `next` of the page before.",
            ),
        ] = None,
        limit: Limit = 50,
    ) -> models.DeliveryPage:
        """The delivery log, newest first: status, attempts with status codes and latencies."""
        if cursor is not None and before is not None:
            raise HTTPException(400, "pass cursor, or the deprecated before, not both")
        position = DELIVERIES.decode(cursor) if cursor is not None else before
        sub = await self._readable(request, principal, subscription_id)
        async with engine_of(request).connect() as conn:
            rows = await outbox.list_deliveries(conn, sub.id, status=status, before=position, limit=limit + 1)
            page, next_cursor = page_of(rows, limit, DELIVERIES, lambda delivery: delivery.seq)
            attempts = await outbox.attempts_of(conn, [d.seq for d in page])
        return models.DeliveryPage(
            items=[_delivery_view(d, attempts[d.seq], _masker(sub, principal)) for d in page],
            next_cursor=next_cursor,
            next=page[-1].seq if next_cursor else None,
        )

    async def redeliver(
        self, delivery_id: DeliveryId, request: Request, principal: Caller
    ) -> models.Delivery:
        """Send a delivered or dead delivery again, same ``webhook-id``, with a fresh retry schedule."""
        delivery = sub = None
        if _DELIVERY_ID.fullmatch(delivery_id):
            async with engine_of(request).connect() as conn:
                delivery = await outbox.get_delivery(conn, delivery_id)
                if delivery is not None:
                    sub = await subscriptions.get_subscription(conn, delivery.subscription_id)
        if delivery is None or sub is None or not await may_read(request, principal, sub.namespace):
            raise _no_delivery(delivery_id)
        await _may_change(request, principal, sub.created_by, sub.namespace, sub.id)
        if sub.state == "disabled":
            raise HTTPException(409, f"subscription {sub.id} is disabled; PATCH it to state active first")
        if sub.state == "suspended":
            raise HTTPException(409, f"subscription {sub.id} is {lost_access(sub)}")
        async with engine_of(request).begin() as conn:
            queued = await outbox.redeliver(conn, delivery_id, self._now())
            attempts = await outbox.attempts_of(conn, [queued.seq]) if queued else {}
        if queued is None:
            raise HTTPException(409, f"delivery {delivery_id} is already pending; it will be attempted again")
        return _delivery_view(queued, attempts[queued.seq], _masker(sub, principal))


async def _may_subscribe(request: Request, principal: Principal, namespace: str | None) -> None:
    """403 unless ``principal`` may subscribe in ``namespace`` (a read-only caller may not)."""
    if not await may_subscribe(request, principal, namespace):
        where = f"namespace {namespace!r}" if namespace is not None else "every namespace"
        raise HTTPException(
            403,
            f"{principal.username} has read-only access to {where}: may not create or change "
            "subscriptions there",
        )


async def _may_change(
    request: Request, principal: Principal, created_by: str, namespace: str | None, subscription_id: str
) -> None:
    """403 unless ``principal`` may subscribe in ``namespace`` and either created the subscription
    or may update jobs there."""
    await _may_subscribe(request, principal, namespace)
    if created_by == principal.username or await may_update(request, principal, namespace):
        return
    where = f"namespace {namespace!r}" if namespace is not None else "every namespace"
    raise HTTPException(
        403,
        f"{principal.username} may not change subscription {subscription_id}: only its creator or "
        f"someone allowed to update MPIJobs or TrainJobs in {where} may",
    )


def build_router(
    settings: NotifySettings,
    *,
    resolver: Resolver = system_resolver,
    clock: Clock | None = None,
    quotas: SubscriptionQuotas = DEFAULT_QUOTAS,
) -> APIRouter:
    """The notifications API over ``settings``; ``resolver`` and ``clock`` are seams for tests."""
    if not 1 <= quotas.recipients <= MAX_RECIPIENTS:
        raise ValueError(f"the recipients quota must be 1 to {MAX_RECIPIENTS}, not {quotas.recipients}")
    api = _NotificationsApi(settings, resolver, clock or (lambda: datetime.now(UTC)), quotas)
    router = APIRouter(
        prefix="/api/v1",
        tags=["notifications"],
        dependencies=[Depends(known_query_only)],
        responses=AUTHENTICATED,
    )
    for method, path, handler, status, answers in (
        ("POST", "/webhooks", api.create, 201, errors(400, 403, 413, 429)),
        ("GET", "/webhooks", api.list_, 200, errors(400, 403)),
        ("GET", "/webhooks/{subscription_id}", api.get, 200, errors(400, 404)),
        ("PATCH", "/webhooks/{subscription_id}", api.patch, 200, errors(400, 403, 404, 413, 429)),
        ("DELETE", "/webhooks/{subscription_id}", api.delete, 204, errors(400, 403, 404)),
        ("POST", "/webhooks/{subscription_id}/rotate-secret", api.rotate, 200, errors(400, 403, 404, 409)),
        ("GET", "/webhooks/{subscription_id}/deliveries", api.deliveries, 200, errors(400, 404)),
        ("POST", "/deliveries/{delivery_id}/redeliver", api.redeliver, 202, errors(400, 403, 404, 409)),
    ):
        router.add_api_route(path, handler, methods=[method], status_code=status, responses=answers)
    return router
