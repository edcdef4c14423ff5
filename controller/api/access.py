"""Who a bearer token stands for, and which namespaces they may read (no web framework here).

The API asks one :class:`AccessReviewer` five questions: *whose token is this?*, *may this
principal list MPIJobs/TrainJobs in that namespace* (``None``: in every namespace)?, before
someone creates a notification subscription or changes their own, *may they subscribe there*
(no for a read-only caller)?, before someone changes a subscription they did not create,
*may they update MPIJobs/TrainJobs there*? and, before a run's logs are served, *may they read
container logs there*? Three answers ship here, chosen by ``api.auth``:

- :class:`StaticAccess` (``static``): tokens with per-user namespace allowlists from settings,
  for a laptop or a CI job: ``namespaces`` to read, ``manage`` to subscribe and change anyone's
  subscriptions (empty by default: a read-only token);
- :class:`OpenAccess` (``off``): everyone is ``anonymous`` and reads and changes everything, for
  local development only — it must be chosen explicitly, never by default;
- a Kubernetes-backed reviewer (``kubernetes``): TokenReview + SubjectAccessReview through the
  Kubernetes gateway (``controller.kube.reviews``, wired by the CLI, since the core never imports
  the watchers), wrapped in :class:`CachedAccess` so a page of requests costs one review.

This module imports no FastAPI, so the watchers can implement the protocol without pulling
the web stack in; :mod:`controller.api.auth` is the FastAPI seam on top of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Generic, TypeVar

from controller.contract.access import AccessReviewer, Principal, ReviewUnavailableError
from controller.contract.clock import Monotonic
from controller.contract.settings import ApiSettings, StaticUser

__all__ = [
    "ALL_NAMESPACES",
    "AccessReviewer",
    "CachedAccess",
    "KubernetesReviewers",
    "OpenAccess",
    "Principal",
    "ReviewBudget",
    "ReviewBudgetExceededError",
    "ReviewUnavailableError",
    "StaticAccess",
    "build_reviewer",
    "forwarded_reviewer",
    "spending",
    "token_digest",
]

ALL_NAMESPACES = "*"
"""In a static allowlist: every namespace."""


def token_digest(token: str) -> bytes:
    """Tokens are looked up, cached and rate-limited by digest: equal-time lookups, no secret as a key."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class StaticAccess:
    """Tokens and namespace allowlists from settings (``MPIJC_API__TOKENS``).

    ``namespaces`` are read; ``manage`` (a subset in practice, empty by default) are where the
    user may subscribe and change anyone's subscriptions: a token without it is read-only.
    """

    def __init__(self, tokens: Mapping[str, StaticUser]) -> None:
        self._users = {token_digest(token): user for token, user in tokens.items() if token}
        self._namespaces = {user.username: frozenset(user.namespaces) for user in tokens.values()}
        self._managed = {user.username: frozenset(user.manage) for user in tokens.values()}

    async def review_token(self, token: str) -> Principal | None:
        user = self._users.get(token_digest(token)) if token else None
        return Principal(user.username, tuple(user.groups)) if user else None

    async def can_list(self, principal: Principal, namespace: str | None) -> bool:
        return _allows(self._namespaces.get(principal.username, frozenset()), namespace)

    async def can_update(self, principal: Principal, namespace: str | None) -> bool:
        return _allows(self._managed.get(principal.username, frozenset()), namespace)

    async def can_subscribe(self, principal: Principal, namespace: str | None) -> bool:
        return await self.can_update(principal, namespace)

    async def can_read_logs(self, principal: Principal, namespace: str) -> bool:
        """Who may read a namespace reads its runs' logs."""
        return await self.can_list(principal, namespace)


def _allows(allowlist: frozenset[str], namespace: str | None) -> bool:
    """Whether ``allowlist`` covers ``namespace`` (``None``, every namespace, needs ``"*"``)."""
    return ALL_NAMESPACES in allowlist or (namespace is not None and namespace in allowlist)


class OpenAccess:
    """No authentication: everyone is ``anonymous`` and may read every namespace (``api.auth=off``)."""

    ANONYMOUS = Principal("anonymous", ("system:unauthenticated",))

    async def review_token(self, token: str) -> Principal | None:
        return self.ANONYMOUS

    async def can_list(self, principal: Principal, namespace: str | None) -> bool:
        return True

    async def can_update(self, principal: Principal, namespace: str | None) -> bool:
        return True

    async def can_subscribe(self, principal: Principal, namespace: str | None) -> bool:
        return True

    async def can_read_logs(self, principal: Principal, namespace: str) -> bool:
        return True


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ReviewBudgetExceededError(ReviewUnavailableError):
    """A request asked for more access decisions than its budget allows; those it already
    got are kept, so the same request made again goes further."""


class ReviewBudget:
    """How many access decisions one request may still ask the reviewer for beyond its cache."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.spent = 0

    def spend(self) -> None:
        """Count one decision; :class:`ReviewBudgetExceededError` once ``limit`` are spent."""
        if self.spent >= self.limit:
            raise ReviewBudgetExceededError(
                f"this request needs more than {self.limit} access reviews (api.max_reviews_per_request)"
            )
        self.spent += 1


_budget: ContextVar[ReviewBudget | None] = ContextVar("mpijc_review_budget", default=None)


@contextlib.contextmanager
def spending(budget: ReviewBudget | None) -> Iterator[None]:
    """Decisions a :class:`CachedAccess` computes inside this block (and in tasks started in it)
    are counted against ``budget``; ``None`` counts nothing."""
    token = _budget.set(budget)
    try:
        yield
    finally:
        _budget.reset(token)


class _TTLCache(Generic[K, V]):
    """Answers kept for ``ttl_s`` seconds (``ttl_of(answer)`` when given), at most ``size`` of
    them (the oldest go first); a lifetime counts from when the question was asked.

    An answer is cached as the future of its computation, so concurrent callers asking the
    same question await one computation instead of each starting their own. A failed
    computation is not kept: the next caller asks again.
    """

    def __init__(
        self, ttl_s: float, size: int, clock: Monotonic, ttl_of: Callable[[V], float] | None = None
    ) -> None:
        self._ttl_of = ttl_of or (lambda _: ttl_s)
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[K, tuple[float, asyncio.Future[V]]] = OrderedDict()

    async def get(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        now = self._clock()
        held = self._entries.get(key)
        if held is not None and not _failed(held[1]) and (not held[1].done() or now < held[0]):
            return await asyncio.shield(held[1])
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._entries[key] = (now, future)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)
        try:
            value = await compute()
        except BaseException as exc:
            self._forget(key, future)
            if isinstance(exc, Exception):
                future.set_exception(exc)
                future.exception()  # marked retrieved: waiters re-raise it, the loop does not warn
            else:
                future.cancel()
            raise
        if self._entries.get(key, (0.0, None))[1] is future:
            self._entries[key] = (now + self._ttl_of(value), future)
        future.set_result(value)
        return value

    def _forget(self, key: K, future: asyncio.Future[V]) -> None:
        held = self._entries.get(key)
        if held is not None and held[1] is future:
            del self._entries[key]


def _failed(future: asyncio.Future[V]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)


class CachedAccess:
    """Remembers another reviewer's answers: tokens and allowed decisions for ``ttl_s`` seconds,
    denied decisions for ``denied_ttl_s`` (``ttl_s`` unless given), like the API server's own
    webhook authorizer cache (authorized and unauthorized TTLs).

    Denials are cached too: a client retrying a bad token must not become a TokenReview storm
    on the API server. Tokens are kept by digest, never as themselves. Decisions are kept per
    :class:`Principal` — the identity a token stands for, not the token — so every token of one
    user or service account shares them; a freshly minted token costs one TokenReview.

    A decision not in the cache is counted against the budget of the request asking
    (:func:`spending`); past it, :class:`ReviewBudgetExceededError` and no review is sent.
    """

    def __init__(
        self,
        inner: AccessReviewer,
        ttl_s: float,
        size: int = 10_000,
        clock: Monotonic = time.monotonic,
        *,
        denied_ttl_s: float | None = None,
    ) -> None:
        self._inner = inner
        self._token_reviewer = inner
        self._ttl_s, self._size, self._clock = ttl_s, size, clock
        denied = ttl_s if denied_ttl_s is None else denied_ttl_s
        self._tokens: _TTLCache[bytes, Principal | None] = _TTLCache(ttl_s, size, clock)
        self._decisions: _TTLCache[tuple[str, Principal, str | None], bool] = _TTLCache(
            ttl_s, size, clock, lambda allowed: ttl_s if allowed else denied
        )

    async def review_token(self, token: str) -> Principal | None:
        if not token:
            return None
        return await self._tokens.get(token_digest(token), lambda: self._token_reviewer.review_token(token))

    def reviewing_tokens_with(self, tokens: AccessReviewer) -> CachedAccess:
        """A twin answering the same access decisions from the same cache, whose tokens ``tokens``
        reviews and whose token answers are cached apart from this one's: a token one of them
        accepted is never taken for accepted by the other (one is reviewed with other audiences)."""
        twin = copy.copy(self)
        twin._token_reviewer = tokens
        twin._tokens = _TTLCache(self._ttl_s, self._size, self._clock)
        return twin

    async def can_list(self, principal: Principal, namespace: str | None) -> bool:
        return await self._decide("list", principal, namespace, self._inner.can_list)

    async def can_update(self, principal: Principal, namespace: str | None) -> bool:
        return await self._decide("update", principal, namespace, self._inner.can_update)

    async def can_subscribe(self, principal: Principal, namespace: str | None) -> bool:
        return await self._decide("subscribe", principal, namespace, self._inner.can_subscribe)

    async def can_read_logs(self, principal: Principal, namespace: str) -> bool:
        async def ask(who: Principal, where: str | None) -> bool:
            return await self._inner.can_read_logs(who, where or "")

        return await self._decide("logs", principal, namespace, ask)

    async def _decide(
        self,
        verb: str,
        principal: Principal,
        namespace: str | None,
        ask: Callable[[Principal, str | None], Awaitable[bool]],
    ) -> bool:
        async def compute() -> bool:
            budget = _budget.get()
            if budget is not None:
                budget.spend()
            return await ask(principal, namespace)

        return await self._decisions.get((verb, principal, namespace), compute)


KubernetesReviewers = Callable[[Sequence[str]], AccessReviewer]
"""Builds the cluster-backed reviewer whose TokenReviews name these audiences (none: the API
server's own)."""


def build_reviewer(settings: ApiSettings, kubernetes: KubernetesReviewers | None = None) -> AccessReviewer:
    """The reviewer ``settings.auth`` asks for; ``kubernetes`` builds the cluster-backed one, given
    ``settings.token_audiences``."""
    if settings.auth == "off":
        return OpenAccess()
    if settings.auth == "static":
        return StaticAccess(settings.tokens)
    if kubernetes is None:
        raise ValueError("api.auth=kubernetes needs a Kubernetes reviewer; none was given")
    return CachedAccess(
        kubernetes(settings.token_audiences),
        settings.review_ttl_s,
        settings.review_cache_size,
        denied_ttl_s=settings.review_denied_ttl_s,
    )


def forwarded_reviewer(
    settings: ApiSettings, reviewer: AccessReviewer, kubernetes: KubernetesReviewers | None = None
) -> AccessReviewer:
    """Who reviews the tokens OpenShift's OAuth proxy forwards, beside ``reviewer`` (what
    :func:`build_reviewer` gave): in ``kubernetes`` mode its twin whose TokenReviews name
    ``settings.forwarded_token_audiences`` (empty: none, so the API server's own are checked, as an
    OpenShift OAuth access token needs), with its own cache of token answers and the same access
    decisions; in the other modes ``reviewer`` itself (static tokens have no audience)."""
    if isinstance(reviewer, CachedAccess) and kubernetes is not None:
        return reviewer.reviewing_tokens_with(kubernetes(settings.forwarded_token_audiences))
    return reviewer
