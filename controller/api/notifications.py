"""The notifications API: subscriptions of either channel, their delivery log, and redelivery
(``/api/v1/webhooks…``, ``/api/v1/deliveries…``).

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
delivery still pending (409) — never a 5xx. The bodies and their checks are
:mod:`controller.api.subscription_input` (every field bounded in length before it is checked,
every check linear in its input); the answers are built by :mod:`controller.api.subscription_views`.
Queries live in :mod:`controller.store.subscriptions` and :mod:`controller.store.outbox`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, Response
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.api import models
from controller.api.auth import Principal, may_read, may_subscribe, may_update, require_namespace
from controller.api.creators import creator_of, lost_access
from controller.api.deps import engine_of
from controller.api.limits import DEFAULT_QUOTAS, SubscriptionQuotas
from controller.api.paging import MAX_SEQ, Cursor, K, Keyset, Limit, by_sequence, page_of
from controller.api.params import NamespaceQuery, errors
from controller.api.routing import Caller, api_router, listed_namespaces
from controller.api.subscription_input import (
    DELIVERY_ID,
    MAX_ID,
    MAX_RECIPIENTS,
    SUBSCRIPTION_ID,
    DeliveryId,
    SubscriptionId,
    SubscriptionIn,
    SubscriptionPatch,
    Validator,
    reject_nul,
    unprocessable,
)
from controller.api.subscription_views import delivery_view, fields_of, masker, view
from controller.contract.clock import Clock
from controller.contract.egress import EgressPolicy, Resolver, system_resolver
from controller.contract.notifications import Channel, DeliveryStatus, SubscriptionState
from controller.contract.settings import NotifySettings
from controller.contract.signing import generate_secret
from controller.store import outbox, subscriptions
from controller.store.subscriptions import SubscriptionRecord

__all__ = ["DELIVERIES", "SUBSCRIPTIONS", "build_router"]

_FILTER_FIELDS = ("namespace", "job_name", "label_selector", "event_types", "rules", "severities")


def _load_id(key: list[Any]) -> str:
    (subscription_id,) = key
    if not isinstance(subscription_id, str) or not SUBSCRIPTION_ID.fullmatch(subscription_id):
        raise ValueError("not a subscription id")
    return subscription_id


SUBSCRIPTIONS = Keyset[str]("subscriptions", lambda sub_id: [sub_id], _load_id)
"""Subscriptions are ordered by id."""
DELIVERIES = by_sequence("deliveries")
"""Deliveries are ordered newest first by their place in the log."""


async def _authorize(request: Request, principal: Principal, namespace: str | None) -> None:
    """403 unless ``principal`` may read ``namespace``, which they named (so naming it reveals nothing)."""
    if namespace is not None:
        await require_namespace(request, principal, namespace)
    elif not await may_read(request, principal, None):
        raise HTTPException(
            403,
            "a subscription without a namespace covers every namespace; it needs read access to all of them",
        )


def _no_subscription(subscription_id: str) -> HTTPException:
    return HTTPException(404, f"no subscription with id {subscription_id!r}")


_DEPRECATED_PAGE = "Deprecated (use `cursor`): the `next` of the page before."
After = Annotated[str | None, Query(max_length=MAX_ID, deprecated=True, description=_DEPRECATED_PAGE)]
"""What ``cursor`` replaced in listing subscriptions: the id the page before ended at."""
Before = Annotated[int | None, Query(ge=1, le=MAX_SEQ, deprecated=True, description=_DEPRECATED_PAGE)]
"""What ``cursor`` replaced in listing deliveries: the sequence the page before ended at."""


def _position(keyset: Keyset[K], cursor: str | None, name: str, deprecated: K | None) -> K | None:
    """Where a page starts: ``cursor`` read by ``keyset``, else the deprecated parameter ``name``;
    400 when both are given."""
    if cursor is not None and deprecated is not None:
        raise HTTPException(400, f"pass cursor, or the deprecated {name}, not both")
    return keyset.decode(cursor) if cursor is not None else deprecated


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
        self._validator = Validator(settings, policy, clock, quotas)

    async def _readable(
        self, request: Request, principal: Principal, subscription_id: str
    ) -> SubscriptionRecord:
        """The subscription, if ``principal`` may read it; 404 alike for none and for not readable."""
        sub = None
        if SUBSCRIPTION_ID.fullmatch(subscription_id):
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
        reject_nul(body.model_dump())
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
        return models.CreatedSubscription.model_validate({**fields_of(sub, principal), "secret": secret})

    async def list_(
        self,
        request: Request,
        principal: Caller,
        namespace: NamespaceQuery = None,
        channel: Channel | None = None,
        state: SubscriptionState | None = None,
        cursor: Cursor = None,
        after: After = None,
        limit: Limit = 50,
    ) -> models.SubscriptionPage:
        """Subscriptions the caller may see, by id; page with ``cursor=<next_cursor>``."""
        position = _position(SUBSCRIPTIONS, cursor, "after", after)
        if after is not None and not SUBSCRIPTION_ID.fullmatch(after):
            raise unprocessable(f"after {after!r} is not a subscription id (the 'next' of the page before)")
        visible = await listed_namespaces(request, principal, namespace)
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
            items=[view(s, principal) for s in page],
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
            {**fields_of(sub, principal), "notices": [models.Notice.model_validate(n) for n in notices]}
        )

    async def patch(
        self, subscription_id: SubscriptionId, body: SubscriptionPatch, request: Request, principal: Caller
    ) -> models.Subscription:
        """Change filters, target or state; ``state: active`` re-enables a disabled subscription."""
        changes = body.model_dump(exclude_unset=True)
        reject_nul(changes)
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
        return view(updated, principal)

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
        before: Before = None,
        limit: Limit = 50,
    ) -> models.DeliveryPage:
        """The delivery log, newest first: status, attempts with status codes and latencies."""
        position = _position(DELIVERIES, cursor, "before", before)
        sub = await self._readable(request, principal, subscription_id)
        async with engine_of(request).connect() as conn:
            rows = await outbox.list_deliveries(conn, sub.id, status=status, before=position, limit=limit + 1)
            page, next_cursor = page_of(rows, limit, DELIVERIES, lambda delivery: delivery.seq)
            attempts = await outbox.attempts_of(conn, [d.seq for d in page])
        return models.DeliveryPage(
            items=[delivery_view(d, attempts[d.seq], masker(sub, principal)) for d in page],
            next_cursor=next_cursor,
            next=page[-1].seq if next_cursor else None,
        )

    async def redeliver(
        self, delivery_id: DeliveryId, request: Request, principal: Caller
    ) -> models.Delivery:
        """Send a delivered or dead delivery again, same ``webhook-id``, with a fresh retry schedule."""
        delivery = sub = None
        if DELIVERY_ID.fullmatch(delivery_id):
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
        return delivery_view(queued, attempts[queued.seq], masker(sub, principal))


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
    router = api_router("/api/v1", "notifications")
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
