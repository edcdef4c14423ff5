"""One webhook attempt over HTTP, what its answer means, and when to try again.

What an answer means (Standard Webhooks, "Delivery success and failure"):

=================================  =========================================================
``2xx``                            delivered
``408``, ``429``, ``5xx``          retried; a ``Retry-After`` (seconds or HTTP date) is honoured
timeout, connection error          retried
``410 Gone``                       dead at once, and the subscription is disabled
other ``3xx``/``4xx``              dead at once: redirects are not followed, and the receiver
                                   said the request itself is wrong, so repeating it won't help
address refused by the SSRF guard  dead at once
=================================  =========================================================

Retries follow ``notify.retry_schedule_s`` with jitter (:class:`RetrySchedule`). Every attempt is
re-signed with a fresh ``webhook-timestamp`` and the same ``webhook-id``, and goes to the
address the guard just checked (:meth:`controller.contract.egress.Target.pinned_url`), with the
original ``Host`` and TLS server name.

Each endpoint gets its own small connection pool, an ``aiohttp`` session of
``endpoint_concurrency`` connections (:class:`EndpointTransports`): a slow endpoint's
connections never share a pool with the others', and no pool grows large. The client is
``aiohttp`` (its HTTP parser and headers in C), not ``httpx``: the same signed POST costs a
third of the CPU (``benchmarks.webhook_sender``: 0.21 against 0.65 ms per request on loopback),
and the attempt was most of a delivery's cost. What a client may add is turned off: redirects
(never followed here), cookies, proxies from the environment (which would bypass the SSRF
guard's pinning), ``Accept`` headers, decompressing the answer, and its own timeouts (the
whole-request deadline bounds everything, see :meth:`WebhookSender.send`).
"""

from __future__ import annotations

import asyncio
import random
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal

import aiohttp

from controller.contract.egress import EgressPolicy, EgressRefusedError
from controller.contract.signing import signed_headers

Verdict = Literal["delivered", "retry", "failed", "gone"]

USER_AGENT = "mpijob-controller-webhooks/1"
_SNIPPET_BYTES = 512
_DRAIN_BYTES = 64 * 1024  # read this much of an answer so its connection can be reused
KEEPALIVE_S = 5.0
"""Seconds an idle connection to an endpoint is kept for its next request."""


@dataclass(frozen=True)
class Attempt:
    """The result of one try."""

    verdict: Verdict
    status_code: int | None
    latency_s: float
    error: str | None = None
    retry_after_s: float | None = None


def verdict_of(status: int) -> Verdict:
    """What an HTTP status means for a webhook (see the module docstring)."""
    if 200 <= status < 300:
        return "delivered"
    if status == 410:
        return "gone"
    if status in {408, 429} or status >= 500:
        return "retry"
    return "failed"


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` as seconds from now (delta-seconds or an HTTP date); ``None`` if absent or bad."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


@dataclass
class RetrySchedule:
    """When to try again after failed attempt ``n`` (1-based): the schedule, jittered, or never."""

    schedule: Sequence[float]
    jitter: float
    max_retry_after_s: float
    rng: random.Random

    @property
    def attempts(self) -> int:
        """Attempts in all, the first included."""
        return len(self.schedule) + 1

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``; ``None`` when ``attempt`` was the last."""
        if attempt > len(self.schedule):
            return None
        delay = self.schedule[attempt - 1] * self.rng.uniform(1 - self.jitter, 1 + self.jitter)
        if retry_after_s is not None:  # never earlier than the receiver asked
            delay = max(delay, min(retry_after_s, self.max_retry_after_s))
        return delay


class EndpointTransports:
    """One ``aiohttp`` session per endpoint (keyed by subscription), closed after ``idle_s`` unused."""

    def __init__(self, connections: int, idle_s: float = 60.0) -> None:
        self._connections = connections
        self._idle_s = idle_s
        self._tls = ssl.create_default_context()  # loaded once, not per endpoint
        self._sessions: dict[str, tuple[aiohttp.ClientSession, float]] = {}

    def get(self, key: str) -> aiohttp.ClientSession:
        held = self._sessions.get(key)
        session = held[0] if held else self._open()
        self._sessions[key] = (session, time.monotonic())
        return session

    def _open(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=self._connections, ssl=self._tls, keepalive_timeout=KEEPALIVE_S
            ),
            cookie_jar=aiohttp.DummyCookieJar(),
            timeout=aiohttp.ClientTimeout(),  # none: the whole-request deadline bounds an attempt
            auto_decompress=False,
            skip_auto_headers=("Accept", "Accept-Encoding"),
        )

    async def sweep(self, busy: set[str]) -> None:
        """Close the pools of endpoints idle for ``idle_s`` (not those in ``busy``)."""
        cutoff = time.monotonic() - self._idle_s
        idle = [key for key, (_, used) in self._sessions.items() if used < cutoff and key not in busy]
        for key in idle:
            session, _ = self._sessions.pop(key)
            await session.close()

    async def aclose(self) -> None:
        sessions, self._sessions = self._sessions, {}
        for session, _ in sessions.values():
            await session.close()


class WebhookSender:
    """Sends signed webhook requests, each endpoint through its own pool."""

    def __init__(self, transports: EndpointTransports, policy: EgressPolicy, timeout_s: float) -> None:
        self._transports = transports
        self._policy = policy
        self._timeout_s = timeout_s

    async def send(
        self,
        endpoint: str,
        url: str,
        msg_id: str,
        body: bytes,
        secrets: Sequence[str],
        headers: Mapping[str, str] | None = None,
    ) -> Attempt:
        """POST ``body`` to ``url`` once (``headers`` add to or replace the content type); never
        raises for what the endpoint or network does."""
        started = time.perf_counter()
        try:
            target = await self._policy.check(url)
        except EgressRefusedError as exc:
            return Attempt("failed", None, time.perf_counter() - started, f"refused: {exc}")
        sent = {
            "content-type": "application/json",
            **(headers or {}),
            "user-agent": USER_AGENT,
            "host": target.host_header,
            **signed_headers(secrets, msg_id, body),
        }
        session = self._transports.get(endpoint)
        try:
            async with (
                asyncio.timeout(self._timeout_s),  # connecting, sending, answer and drain
                session.post(
                    target.pinned_url(),
                    data=body,
                    headers=sent,
                    allow_redirects=False,
                    server_hostname=target.host if target.scheme == "https" else None,
                ) as response,
            ):
                latency = time.perf_counter() - started
                answer = await _read_some(response)
        except TimeoutError:
            return Attempt(
                "retry", None, time.perf_counter() - started, f"timed out after {self._timeout_s:g} s"
            )
        except aiohttp.ClientError as exc:
            return Attempt(
                "retry", None, time.perf_counter() - started, f"{type(exc).__name__}: {exc or 'failed'}"
            )
        verdict = verdict_of(response.status)
        error = None if verdict == "delivered" else answer or response.reason or None
        retry_after = parse_retry_after(response.headers.get("retry-after")) if verdict == "retry" else None
        return Attempt(verdict, response.status, latency, error, retry_after)


async def _read_some(response: aiohttp.ClientResponse) -> str:
    """The start of the answer (for the delivery log); reads a little more so the connection is reused."""
    read = bytearray()
    while len(read) < _DRAIN_BYTES and (chunk := await response.content.read(_DRAIN_BYTES - len(read))):
        read += chunk
    return read[:_SNIPPET_BYTES].decode(errors="replace").strip()
