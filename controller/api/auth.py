"""Who is asking, and which namespaces they may read: the seam every route goes through.

Every route takes ``principal: Annotated[Principal, Depends(current_principal)]``; a route
returning data of one namespace first awaits :func:`require_namespace` (403 otherwise), and a
route listing across namespaces filters with :func:`visible_namespaces`. The answers come from
the application's :class:`~controller.api.access.AccessReviewer` (static tokens, Kubernetes
TokenReview/SubjectAccessReview, or explicitly off), so routers never know which one runs.

Errors: no or a malformed ``Authorization`` header, or a token nobody accepts → 401 with
``WWW-Authenticate: Bearer``; a namespace the principal may not list MPIJobs/TrainJobs in →
403; a reviewer that cannot answer (the Kubernetes API is down) → 503.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Annotated, TypeVar

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from controller.api.access import Principal, ReviewUnavailableError
from controller.api.deps import engine_of, reviewer_of
from controller.store import queries

__all__ = ["Principal", "current_principal", "require_namespace", "visible_namespaces"]

_T = TypeVar("_T")

REVIEW_CONCURRENCY = 16
"""Namespace reviews sent at once when a list is filtered (a cold cache with many namespaces)."""

bearer = HTTPBearer(
    auto_error=False,
    description="A Kubernetes service-account or user token (in a cluster), or a static token from "
    "`MPIJC_API__TOKENS` (locally).",
)


async def _answer(question: Awaitable[_T]) -> _T:
    try:
        return await question
    except ReviewUnavailableError as exc:
        raise HTTPException(503, f"cannot check access right now: {exc}") from exc


async def current_principal(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal:
    """The caller of ``request``; 401 unless its bearer token is accepted."""
    token = credentials.credentials if credentials is not None else ""
    principal = await _answer(reviewer_of(request).review_token(token))
    if principal is None:
        detail = "the bearer token was not accepted" if token else "a bearer token is required"
        raise HTTPException(401, detail, headers={"WWW-Authenticate": "Bearer"})
    return principal


async def require_namespace(request: Request, principal: Principal, namespace: str) -> None:
    """Raise ``HTTPException(403)`` unless ``principal`` may read ``namespace``."""
    if not await _answer(reviewer_of(request).can_list(principal, namespace)):
        raise HTTPException(
            403, f"{principal.username} may not list MPIJobs or TrainJobs in namespace {namespace!r}"
        )


async def visible_namespaces(request: Request, principal: Principal) -> frozenset[str] | None:
    """Namespaces ``principal`` may read; ``None`` means all of them (a cluster-wide grant).

    Without a cluster-wide grant, each namespace that has runs is reviewed (answers are cached
    by the reviewer), at most :data:`REVIEW_CONCURRENCY` at a time.
    """
    reviewer = reviewer_of(request)
    if await _answer(reviewer.can_list(principal, None)):
        return None
    async with engine_of(request).connect() as conn:
        candidates = await queries.run_namespaces(conn)
    gate = asyncio.Semaphore(REVIEW_CONCURRENCY)

    async def allowed(namespace: str) -> bool:
        async with gate:
            return await reviewer.can_list(principal, namespace)

    verdicts = await _answer(asyncio.gather(*(allowed(ns) for ns in candidates)))
    return frozenset(ns for ns, ok in zip(candidates, verdicts, strict=True) if ok)
