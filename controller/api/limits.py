"""The API's operational limits: request body size, per-client rate limits, subscription quotas.

Read from the settings (``MPIJC_API__MAX_BODY_BYTES``, ``MPIJC_API__RATE_PER_S``, …,
``MPIJC_NOTIFY__MAX_SUBSCRIPTIONS_PER_USER``, …), whose fields hold the defaults, into two
frozen records: :func:`create_app` takes an :class:`ApiLimits`, the webhooks router a
:class:`SubscriptionQuotas`.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.contract.settings import ApiSettings, NotifySettings

__all__ = ["DEFAULT_LIMITS", "DEFAULT_QUOTAS", "ApiLimits", "Rate", "SubscriptionQuotas"]


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
    - ``max_body_items`` / ``max_body_containers``: a body with more commas and opening brackets
      (or more brackets), counted before it is parsed, is 413: what parsing and validating it
      may cost (``MPIJC_API__MAX_BODY_ITEMS`` / ``…_CONTAINERS``).
    - ``body_timeout_s``: a body not whole this long after its headers is 408
      (``MPIJC_API__BODY_TIMEOUT_S``).
    - ``reviews_per_request``: access decisions one request may ask for beyond the reviewer's
      cache; more is 503 with ``Retry-After`` (``MPIJC_API__MAX_REVIEWS_PER_REQUEST``).
    """

    max_body_bytes: int
    per_token: Rate | None
    per_address_failures: Rate | None
    tracked_clients: int
    max_body_items: int
    max_body_containers: int
    body_timeout_s: float
    reviews_per_request: int

    def __post_init__(self) -> None:
        if self.max_body_bytes < 1 or self.tracked_clients < 1:
            raise ValueError("max_body_bytes and tracked_clients must be at least 1")

    @classmethod
    def from_settings(cls, api: ApiSettings) -> ApiLimits:
        """The limits ``api`` configures (a rate of 0 turns that limit off)."""
        return cls(
            max_body_bytes=api.max_body_bytes,
            per_token=Rate(api.rate_per_s, api.rate_burst) if api.rate_per_s else None,
            per_address_failures=(
                Rate(api.auth_failure_rate_per_s, api.auth_failure_burst)
                if api.auth_failure_rate_per_s
                else None
            ),
            tracked_clients=api.rate_tracked_clients,
            max_body_items=api.max_body_items,
            max_body_containers=api.max_body_containers,
            body_timeout_s=api.body_timeout_s,
            reviews_per_request=api.max_reviews_per_request,
        )


@dataclass(frozen=True)
class SubscriptionQuotas:
    """Caps on notification subscriptions; expired ones do not count.

    ``per_user`` (by creator) and ``per_namespace`` (cluster-wide subscriptions count as one
    namespace of their own) are answered 429 when full; ``recipients`` (per email
    subscription) is a bound on one request, answered 422.
    """

    per_user: int
    per_namespace: int
    recipients: int

    @classmethod
    def from_settings(cls, notify: NotifySettings) -> SubscriptionQuotas:
        """The quotas ``notify`` configures."""
        return cls(
            per_user=notify.max_subscriptions_per_user,
            per_namespace=notify.max_subscriptions_per_namespace,
            recipients=notify.max_recipients,
        )


DEFAULT_LIMITS = ApiLimits.from_settings(ApiSettings())
DEFAULT_QUOTAS = SubscriptionQuotas.from_settings(NotifySettings())
