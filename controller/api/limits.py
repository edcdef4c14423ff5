"""The API's operational limits: request body size, per-client rate limits, subscription quotas.

Constants for now, gathered in two frozen records so they can be read from settings later
(``ApiSettings`` and ``NotifySettings``) without touching the routes: :func:`create_app`
takes an :class:`ApiLimits`, the webhooks router a :class:`SubscriptionQuotas`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_LIMITS", "DEFAULT_QUOTAS", "ApiLimits", "Rate", "SubscriptionQuotas"]

MAX_BODY_BYTES = 1 << 20
"""1 MiB: a subscription is a few kilobytes; nothing the API takes comes near it."""


@dataclass(frozen=True)
class Rate:
    """A token bucket: ``burst`` requests at once, refilled at ``per_s`` a second."""

    per_s: float
    burst: int

    def __post_init__(self) -> None:
        if not (self.per_s > 0 and self.burst >= 1):
            raise ValueError(f"a rate needs per_s > 0 and burst >= 1, not {self.per_s} and {self.burst}")


@dataclass(frozen=True)
class ApiLimits:
    """What one request, and one client, may cost the API.

    - ``max_body_bytes``: a larger body is answered 413 before it is read whole and before
      authentication (``MPIJC_API__MAX_BODY_BYTES``).
    - ``per_token``: requests of one authenticated client, keyed by its token's digest
      (``MPIJC_API__RATE_PER_S`` / ``MPIJC_API__RATE_BURST``); ``None`` turns it off.
    - ``per_address_failures``: requests from one client address without a token or with a
      token nobody accepts (``MPIJC_API__AUTH_FAILURE_RATE_PER_S`` / ``…_BURST``): the brake on
      token guessing and on TokenReview storms; ``None`` turns it off.
    - ``tracked_clients``: buckets kept in memory per kind; the least recently used go first.
    """

    max_body_bytes: int = MAX_BODY_BYTES
    per_token: Rate | None = field(default_factory=lambda: Rate(per_s=50.0, burst=200))
    per_address_failures: Rate | None = field(default_factory=lambda: Rate(per_s=1.0, burst=30))
    tracked_clients: int = 10_000

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.tracked_clients < 1:
            raise ValueError("max_body_bytes and tracked_clients must be at least 1")


@dataclass(frozen=True)
class SubscriptionQuotas:
    """Caps on notification subscriptions; expired ones do not count.

    ``per_user`` (by creator) and ``per_namespace`` (cluster-wide subscriptions count as one
    namespace of their own) are answered 429 when full; ``recipients`` (per email
    subscription) is a bound on one request, answered 422.
    """

    per_user: int = 50
    per_namespace: int = 200
    recipients: int = 50


DEFAULT_LIMITS = ApiLimits()
DEFAULT_QUOTAS = SubscriptionQuotas()
