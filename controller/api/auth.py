"""Who is asking, what they may read and change: the seam every route goes through.

Every route takes ``principal: Annotated[Principal, Depends(current_principal)]``. Then:

- a route **listing** one namespace first awaits :func:`require_namespace` (403 naming the
  namespace the caller named: it reveals nothing about what is in it);
- a route listing across namespaces filters with :func:`visible_namespaces`;
- a route returning **one object** (a run, a subscription, a delivery) asks :func:`may_read`
  about the object's namespace and answers 404, exactly as for an object that does not exist,
  when the answer is no: a 403 would confirm the object exists;
- a route **creating** a subscription, or changing one, first asks :func:`may_subscribe` (403
  for a read-only caller: a static token without ``manage``);
- a route **changing** an object someone else created asks :func:`may_update`;
- a **stream** that stays open asks :func:`still_allowed` again and again
  (:func:`controller.api.streaming.stream_response` does, for every stream).

The answers come from the application's :class:`~controller.api.access.AccessReviewer` (static
tokens, Kubernetes TokenReview/SubjectAccessReview, or explicitly off), so routers never know
which one runs.

Where the token comes from (:func:`presented_token`): the ``Authorization: Bearer`` header;
else, on a ``GET`` or ``HEAD``, the session cookie the pages' sign-in set (:data:`SESSION_COOKIE`,
HttpOnly, SameSite=Strict: a browser never sends it with another site's request, and a request
that changes anything never reads it); else, on a ``GET`` or ``HEAD`` too (the proxy's session is
a cookie as well), and only on the listener OpenShift's OAuth proxy alone reaches (the pod's
loopback, ``api.forwarded_token_port``, served through :class:`ForwardedTokens`), the proxy's
``X-Forwarded-Access-Token``. The first two are reviewed with ``api.token_audiences``; the
forwarded one by the proxy's reviewer, with ``api.forwarded_token_audiences`` (an OpenShift OAuth
token has no audience of its own, :func:`~controller.api.access.forwarded_reviewer`), its answers
cached apart, so the same token sent as a bearer is still refused. The header on any other
listener is refused (401 naming it). What a caller may read is decided the same way whichever way
its token came.

Errors: no or a malformed ``Authorization`` header, or a token nobody accepts → 401 with
``WWW-Authenticate: Bearer``; a client over its rate (:mod:`controller.api.ratelimit`) → 429
with ``Retry-After``; a namespace the principal may not list MPIJobs/TrainJobs in → 403; a
reviewer that cannot answer (the Kubernetes API is down) → 503.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from controller.api.access import (
    AccessReviewer,
    Principal,
    ReviewBudget,
    ReviewBudgetExceededError,
    ReviewUnavailableError,
    spending,
    token_digest,
)
from controller.api.deps import engine_of, limiter_of, review_limit_of, reviewer_of
from controller.api.ratelimit import RateLimited
from controller.store import queries

__all__ = [
    "FORWARDED_TOKEN",
    "ForwardedTokens",
    "Principal",
    "authenticate",
    "current_principal",
    "may_read",
    "may_read_logs",
    "may_subscribe",
    "may_update",
    "presented_token",
    "principal_of_token",
    "require_namespace",
    "still_allowed",
    "visible_namespaces",
]

_T = TypeVar("_T")
log = logging.getLogger(__name__)

REVIEW_CONCURRENCY = 16
"""Namespace reviews sent at once when a list is filtered (a cold cache with many namespaces)."""
MAX_TOKEN = 16 * 1024
"""Longest bearer token sent for review (service-account and OIDC tokens are a few kilobytes)."""
_PRINCIPAL = "mpijc.principal"
"""Where a request's scope keeps its caller once authenticated."""
_BUDGET = "mpijc.review_budget"
"""Where a request's scope keeps what is left of its access-review budget."""
SESSION_COOKIE = "mpijc_token"
"""The cookie the pages' sign-in sets to the token it was given (:mod:`controller.api.pages`)."""
FORWARDED_TOKEN = "X-Forwarded-Access-Token"
"""Where OpenShift's OAuth proxy (``--pass-access-token``) hands on the signed-in user's token."""
_FORWARDED = "mpijc.forwarded_tokens"
"""Where a request that came to the OAuth proxy's listener keeps the reviewer of its forwarded token."""
_SAFE_METHODS = frozenset({"GET", "HEAD"})

bearer = HTTPBearer(
    auto_error=False,
    description="A Kubernetes service-account or user token (in a cluster), or a static token from "
    "`MPIJC_API__TOKENS` (locally).",
)


def _budget(request: Request) -> ReviewBudget:
    """The request's budget of access decisions (``api.max_reviews_per_request``), made on first use."""
    budget = request.scope.get(_BUDGET)
    if not isinstance(budget, ReviewBudget):
        budget = request.scope[_BUDGET] = ReviewBudget(review_limit_of(request))
    return budget


async def _answer(request: Request, question: Callable[[], Awaitable[_T]]) -> _T:
    """``question()``'s answer, its uncached decisions counted against the request's budget; a
    reviewer that cannot answer, or a spent budget, is 503."""
    try:
        with spending(_budget(request)):
            return await question()
    except ReviewBudgetExceededError as exc:
        raise HTTPException(
            503,
            f"cannot check access in one go: {exc}; the answers it got are kept, retry",
            headers={"Retry-After": "1"},
        ) from exc
    except ReviewUnavailableError as exc:
        raise HTTPException(503, f"cannot check access right now: {exc}") from exc


class ForwardedTokens:
    """ASGI: the application as served to OpenShift's OAuth proxy alone, on the pod's loopback
    (``api.forwarded_token_port``): a request arriving this way may carry the signed-in user's
    token in ``X-Forwarded-Access-Token``, reviewed by ``reviewer``
    (:func:`~controller.api.access.forwarded_reviewer`). Nothing a client sends can mark a
    request so: only the listener serving this does."""

    def __init__(self, app: ASGIApp, reviewer: AccessReviewer) -> None:
        self.app = app
        self.reviewer = reviewer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[_FORWARDED] = self.reviewer
        await self.app(scope, receive, send)


def through_proxy(request: Request) -> bool:
    """Whether ``request`` came through the OAuth proxy's listener (see :class:`ForwardedTokens`):
    its session is the proxy's, so signing out ends there."""
    return request.scope.get(_FORWARDED) is not None


def _credential(
    request: Request, credentials: HTTPAuthorizationCredentials | None
) -> tuple[str, AccessReviewer]:
    """The token ``request`` came with (``""`` for none) and who reviews it (see the module)."""
    if credentials is not None:
        return credentials.credentials, reviewer_of(request)
    if request.method in _SAFE_METHODS and (cookie := request.cookies.get(SESSION_COOKIE)):
        return cookie, reviewer_of(request)
    forwarded: AccessReviewer | None = request.scope.get(_FORWARDED)
    if forwarded is not None and request.method in _SAFE_METHODS:
        return request.headers.get(FORWARDED_TOKEN, ""), forwarded
    return "", reviewer_of(request)


def presented_token(request: Request, credentials: HTTPAuthorizationCredentials | None) -> str:
    """The token ``request`` came with (see the module: header, session cookie, forwarded
    token), or ``""``."""
    return _credential(request, credentials)[0]


async def current_principal(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    """The caller of ``request``; 401 unless its token is accepted, 429 over its rate.

    Asked once per request: a request with a body was already authenticated by
    :func:`authenticate` before its body was read, and that answer is reused."""
    known = request.scope.get(_PRINCIPAL)
    if isinstance(known, Principal):
        return known
    principal = await principal_of_token(request, *_credential(request, credentials))
    request.scope[_PRINCIPAL] = principal
    return principal


async def authenticate(request: Request) -> Principal:
    """:func:`current_principal` outside a route: for the body gate
    (:class:`~controller.api.bodylimit.BodyLimit`), before any of the body is read."""
    return await current_principal(request, await bearer(request))


async def principal_of_token(
    request: Request, token: str, reviewer: AccessReviewer | None = None
) -> Principal:
    """Whom ``token`` stands for, as ``reviewer`` (the application's unless given) says, within
    the rate limits of ``request``'s client; 401 if nobody accepts it, 429 over the rate, 503 if it
    cannot be reviewed now (a sign-in asks this)."""
    limiter = limiter_of(request)
    reviewer = reviewer or reviewer_of(request)
    address = request.client.host if request.client is not None else "unknown"
    digest = token_digest(token) if token else None
    try:
        limiter.before_review(address, digest)
        principal = None
        if len(token) <= MAX_TOKEN:
            principal = await _answer(request, lambda: reviewer.review_token(token))
        if principal is None:
            limiter.failed(address)
            raise HTTPException(401, _refusal(request, token), headers={"WWW-Authenticate": "Bearer"})
        if digest is not None:
            limiter.admitted(digest)
    except RateLimited as exc:
        raise HTTPException(429, exc.detail, headers={"Retry-After": exc.retry_after}) from exc
    return principal


def _refusal(request: Request, token: str) -> str:
    """Why ``token`` (``""``: none) got ``request`` no principal."""
    if token:
        return "the bearer token was not accepted"
    if FORWARDED_TOKEN not in request.headers:
        return "a bearer token is required"
    if _FORWARDED not in request.scope:
        return (
            f"a bearer token is required; {FORWARDED_TOKEN} is read only from the OAuth proxy "
            "beside the API, on its loopback port (MPIJC_API__FORWARDED_TOKEN_PORT)"
        )
    return (
        f"a bearer token is required; {FORWARDED_TOKEN} reads (GET, HEAD) but never changes "
        "anything, as the pages' cookie: send the change with Authorization: Bearer"
    )


async def require_namespace(request: Request, principal: Principal, namespace: str) -> None:
    """Raise ``HTTPException(403)`` unless ``principal`` may read ``namespace`` (for lists of it)."""
    if not await may_read(request, principal, namespace):
        raise HTTPException(
            403, f"{principal.username} may not list MPIJobs or TrainJobs in namespace {namespace!r}"
        )


async def may_read(request: Request, principal: Principal, namespace: str | None) -> bool:
    """Whether ``principal`` may read ``namespace`` (``None``: every namespace, as a cluster-wide
    object needs)."""
    return await _answer(request, lambda: reviewer_of(request).can_list(principal, namespace))


async def may_update(request: Request, principal: Principal, namespace: str | None) -> bool:
    """Whether ``principal`` may update MPIJobs or TrainJobs in ``namespace`` (``None``: in all)."""
    return await _answer(request, lambda: reviewer_of(request).can_update(principal, namespace))


async def may_subscribe(request: Request, principal: Principal, namespace: str | None) -> bool:
    """Whether ``principal`` may create subscriptions in ``namespace`` (``None``: cluster-wide)
    and change their own there."""
    return await _answer(request, lambda: reviewer_of(request).can_subscribe(principal, namespace))


async def may_read_logs(request: Request, principal: Principal, namespace: str) -> bool:
    """Whether ``principal`` may read container logs in ``namespace`` (``get pods/log``)."""
    return await _answer(request, lambda: reviewer_of(request).can_read_logs(principal, namespace))


async def still_allowed(
    request: Request, principal: Principal, namespace: str, *, logs: bool = False
) -> str | None:
    """Asked while a stream of ``namespace`` is open: ``None`` while the token ``request`` came
    with still stands for ``principal`` and they may still read ``namespace`` (``logs``: and its
    container logs); else why not, for the stream's last event.

    Asked of the reviewer (cached for ``api.review_ttl_s``), outside any request's budget and
    rate limits; a reviewer that cannot answer is no refusal (``None``: the stream goes on)."""
    reviewer = reviewer_of(request)
    token, tokens = _credential(request, await bearer(request))
    try:
        with spending(None):
            if not token or await tokens.review_token(token) != principal:
                return "the bearer token is no longer accepted"
            if not await reviewer.can_list(principal, namespace):
                return (
                    f"{principal.username} may no longer list MPIJobs or TrainJobs in namespace {namespace!r}"
                )
            if logs and not await reviewer.can_read_logs(principal, namespace):
                return f"{principal.username} may no longer get pods/log in namespace {namespace!r}"
    except ReviewUnavailableError as exc:
        log.warning("cannot re-check %s's open stream of %s: %s", principal.username, namespace, exc)
    return None


async def visible_namespaces(request: Request, principal: Principal) -> frozenset[str] | None:
    """Namespaces ``principal`` may read; ``None`` means all of them (a cluster-wide grant).

    Without a cluster-wide grant, each namespace that has runs is reviewed (answers are cached
    per identity by the reviewer), at most :data:`REVIEW_CONCURRENCY` at a time, within the
    request's budget of decisions: past it, 503 with ``Retry-After`` (the decisions already
    got are kept, so the retry goes further); a partial list is never answered.
    """
    reviewer = reviewer_of(request)
    if await may_read(request, principal, None):
        return None
    async with engine_of(request).connect() as conn:
        candidates = await queries.run_namespaces(conn)
    gate = asyncio.Semaphore(REVIEW_CONCURRENCY)

    async def allowed(namespace: str) -> bool:
        async with gate:
            return await reviewer.can_list(principal, namespace)

    async def every() -> list[bool]:
        verdicts = await asyncio.gather(*(allowed(ns) for ns in candidates), return_exceptions=True)
        for verdict in verdicts:  # every review ends (and is cached) before any failure is told
            if isinstance(verdict, BaseException):
                raise verdict
        return [bool(v) for v in verdicts]

    verdicts = await _answer(request, every)
    return frozenset(ns for ns, ok in zip(candidates, verdicts, strict=True) if ok)
