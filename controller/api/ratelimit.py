"""Per-client token buckets: how often one client may call the API (no web framework here).

Two kinds of client, each with its own buckets (:class:`~controller.api.limits.ApiLimits`):

- an **authenticated** client, keyed by the digest of its bearer token: every request it makes
  takes a token from its bucket;
- a **client address** that sends no token or one nobody accepts: each such request takes a
  token from the address's bucket. While that bucket is empty, the address is refused before
  any token review is asked for (so guessing tokens cannot become a TokenReview storm), except
  for tokens already known good, whose own bucket holds them.

Buckets live in memory, per process, at most ``tracked_clients`` of each kind (the least
recently used are dropped, which refills them; an attacker would need that many addresses).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from controller.api.limits import ApiLimits, Rate
from controller.contract.clock import Monotonic

__all__ = ["ClientLimiter", "RateLimited", "TokenBuckets"]

K = TypeVar("K", bound=Hashable)


class RateLimited(Exception):
    """A request over its client's rate: ``retry_after_s`` until the next one may go."""

    def __init__(self, retry_after_s: float, detail: str) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s
        self.detail = detail

    @property
    def retry_after(self) -> str:
        """Whole seconds, rounded up, for the ``Retry-After`` header (at least 1)."""
        return str(max(1, math.ceil(self.retry_after_s)))


class TokenBuckets(Generic[K]):
    """One token bucket per key, at most ``size`` of them (least recently used dropped first)."""

    def __init__(self, rate: Rate, size: int, clock: Monotonic) -> None:
        self._rate = rate
        self._size = size
        self._clock = clock
        self._buckets: OrderedDict[K, tuple[float, float]] = OrderedDict()  # key → (tokens, when)

    def __contains__(self, key: K) -> bool:
        return key in self._buckets

    def _level(self, key: K, now: float) -> float:
        tokens, at = self._buckets.get(key, (float(self._rate.burst), now))
        return min(float(self._rate.burst), tokens + max(0.0, now - at) * self._rate.per_s)

    def wait(self, key: K) -> float:
        """Seconds until ``key`` may make a request (0: now); takes nothing."""
        level = self._level(key, self._clock())
        return 0.0 if level >= 1 else (1 - level) / self._rate.per_s

    def take(self, key: K) -> float:
        """Take a token for one request of ``key``: 0 if there was one, else the seconds to wait."""
        now = self._clock()
        level = self._level(key, now)
        wait = 0.0
        if level >= 1:
            level -= 1
        else:
            wait = (1 - level) / self._rate.per_s
        self._buckets[key] = (level, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > self._size:
            self._buckets.popitem(last=False)
        return wait


class ClientLimiter:
    """The API's per-client limits: authenticated clients by token digest, failures by address."""

    def __init__(self, limits: ApiLimits, clock: Monotonic = time.monotonic) -> None:
        self._limits = limits
        self._tokens: TokenBuckets[bytes] | None = (
            TokenBuckets(limits.per_token, limits.tracked_clients, clock) if limits.per_token else None
        )
        self._failures: TokenBuckets[str] | None = (
            TokenBuckets(limits.per_address_failures, limits.tracked_clients, clock)
            if limits.per_address_failures
            else None
        )

    def before_review(self, address: str, token: bytes | None) -> None:
        """Raise :class:`RateLimited` if ``address`` has used up its failures and ``token`` (a
        digest; ``None``: no token) is not one that authenticated lately."""
        if self._failures is None or (token is not None and self._tokens and token in self._tokens):
            return
        wait = self._failures.wait(address)
        if wait:
            raise RateLimited(wait, self._failure_detail(wait))

    def failed(self, address: str) -> None:
        """Count a request from ``address`` that had no accepted token; raise if it was one too many."""
        if self._failures is not None and (wait := self._failures.take(address)):
            raise RateLimited(wait, self._failure_detail(wait))

    def admitted(self, token: bytes) -> None:
        """Count a request authenticated by ``token`` (a digest); raise if it was one too many."""
        if self._tokens is not None and (wait := self._tokens.take(token)):
            rate = self._limits.per_token
            assert rate is not None
            raise RateLimited(
                wait,
                f"too many requests with this bearer token: at most {rate.burst} at once and "
                f"{rate.per_s:g} a second; retry after {max(1, math.ceil(wait))} s",
            )

    def _failure_detail(self, wait: float) -> str:
        return (
            "too many requests without an accepted bearer token from this address; "
            f"retry after {max(1, math.ceil(wait))} s"
        )
