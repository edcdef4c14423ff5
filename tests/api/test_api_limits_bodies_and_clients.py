"""What one request and one client may cost: oversized bodies are refused before they are read whole
or authenticated, and authentication is rate-limited per token and, for failures, per address.

No database is needed: everything here is answered before a route touches one (the engine
goes nowhere), except /healthz, which never touches it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from controller.api.access import CachedAccess, StaticAccess
from controller.api.app import create_app
from controller.api.limits import DEFAULT_LIMITS, ApiLimits, Rate
from controller.api.ratelimit import TokenBuckets
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from tests.api_fixtures import USERS, CountingAccess, bearer

MIB = 1 << 20
LIMIT = DEFAULT_LIMITS.max_body_bytes
NOWHERE = "postgresql://nobody@127.0.0.1:1/none"
NO_DATABASE = "/api/v1/compare?runs=a,a"
"""Authenticated, then refused (400: a uid listed twice) before the database is asked."""


def client_of(
    reviewer: StaticAccess, limits: ApiLimits = DEFAULT_LIMITS, address: str = "10.0.0.1"
) -> httpx.AsyncClient:
    app = create_app(make_engine(NOWHERE), PipelineMetrics(), reviewer, limits=limits)
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://api")


@pytest.fixture
async def counted() -> AsyncIterator[tuple[httpx.AsyncClient, CountingAccess]]:
    reviewer = CountingAccess()
    async with client_of(reviewer) as client:
        yield client, reviewer


# --------------------------------------------------------------------------- body size


async def test_a_5_mib_body_is_413_before_authentication_and_the_server_keeps_answering(
    counted: tuple[httpx.AsyncClient, CountingAccess],
) -> None:
    api, reviewer = counted
    refused = await api.post(
        "/api/v1/webhooks", content=b"x" * (5 * MIB), headers={"content-type": "application/json"}
    )
    assert refused.status_code == 413
    assert refused.json()["detail"] == (
        f"the request body is larger than {LIMIT} bytes, the most this API accepts"
    )
    assert refused.headers["connection"] == "close"
    assert reviewer.reviews == 0, "refused before any token was reviewed"

    assert (await api.get("/healthz")).json() == {"status": "ok"}
    small = await api.post("/api/v1/webhooks", json={"url": "http://127.0.0.1:9/x"}, headers={})
    assert small.status_code == 401, "a body within the limit reaches authentication"


async def test_a_streamed_body_is_cut_off_as_soon_as_it_passes_the_limit(
    counted: tuple[httpx.AsyncClient, CountingAccess],
) -> None:
    api, reviewer = counted
    chunk = b"x" * (4 * 1024)
    sent = 0

    async def endless() -> AsyncIterator[bytes]:
        """A chunked body (no Content-Length) that never ends."""
        nonlocal sent
        while True:
            sent += 1
            yield chunk

    upload = asyncio.create_task(
        api.post("/api/v1/webhooks", content=endless(), headers=bearer("token-admin"))
    )
    health = await api.get("/healthz")
    refused = await upload

    assert health.status_code == 200
    assert refused.status_code == 413
    assert sent <= LIMIT // len(chunk) + 2, f"read {sent} chunks: more than the limit and one chunk"
    assert reviewer.reviews == 1, "the sender was authenticated once, before its body was read"


async def test_a_body_within_the_limit_is_passed_on_whole(
    counted: tuple[httpx.AsyncClient, CountingAccess],
) -> None:
    """A chunked body under the limit reaches the route intact (here: its validation)."""
    api, _ = counted

    async def parts() -> AsyncIterator[bytes]:
        for part in (b'{"url": "http://127.0.0.1:9/x", ', b'"colour": ', b'"blue"}'):
            yield part

    headers = {**bearer("token-admin"), "content-type": "application/json"}
    answer = await api.post("/api/v1/webhooks", content=parts(), headers=headers)
    assert answer.status_code == 422
    assert "Extra inputs are not permitted" in answer.text and "colour" in answer.text


async def test_a_declared_length_that_is_not_a_number_is_400(
    counted: tuple[httpx.AsyncClient, CountingAccess],
) -> None:
    api, _ = counted
    request = api.build_request("POST", "/api/v1/webhooks", content=b"{}")
    request.headers["content-length"] = "12abc"
    answer = await api.send(request)
    assert answer.status_code == 400 and "Content-Length" in answer.json()["detail"]


# --------------------------------------------------------------------------- rate limits

SLOW = 0.001
"""Refills too slowly to matter within a test."""


async def test_failed_authentications_are_limited_per_address_and_known_tokens_pass() -> None:
    reviewer = CountingAccess()
    limits = replace(DEFAULT_LIMITS, per_address_failures=Rate(per_s=SLOW, burst=3))
    async with client_of(reviewer, limits) as api:
        assert (await api.get(NO_DATABASE, headers=bearer("token-bob"))).status_code == 400
        failures = [
            await api.get(NO_DATABASE),
            await api.get(NO_DATABASE, headers=bearer("guess-1")),
            await api.get(NO_DATABASE, headers=bearer("guess-2")),
        ]
        reviews_before = reviewer.reviews
        limited = await api.get(NO_DATABASE, headers=bearer("guess-3"))
        reviews_after = reviewer.reviews
        known = await api.get(NO_DATABASE, headers=bearer("token-bob"))
        unknown_good = await api.get(NO_DATABASE, headers=bearer("token-alice"))

    assert [f.status_code for f in failures] == [401, 401, 401]
    assert limited.status_code == 429
    assert limited.json()["detail"].startswith(
        "too many requests without an accepted bearer token from this address; retry after"
    )
    assert int(limited.headers["retry-after"]) >= 1
    assert reviews_after == reviews_before, "a limited address gets no token reviewed"
    assert known.status_code == 400, "a token that authenticated lately keeps its own bucket"
    assert unknown_good.status_code == 429, "a token never seen waits with its address"


async def test_each_address_has_its_own_failure_bucket() -> None:
    limits = replace(DEFAULT_LIMITS, per_address_failures=Rate(per_s=SLOW, burst=2))
    reviewer = StaticAccess(USERS)
    app = create_app(make_engine(NOWHERE), PipelineMetrics(), reviewer, limits=limits)
    clients = {
        address: httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app, client=(address, 1)), base_url="http://api"
        )
        for address in ("10.0.0.1", "10.0.0.2")
    }
    async with clients["10.0.0.1"] as one, clients["10.0.0.2"] as two:
        first = [(await one.get(NO_DATABASE)).status_code for _ in range(3)]
        second = [(await two.get(NO_DATABASE)).status_code for _ in range(2)]
    assert first == [401, 401, 429]
    assert second == [401, 401]


async def test_an_authenticated_client_is_limited_by_its_token() -> None:
    limits = replace(DEFAULT_LIMITS, per_token=Rate(per_s=SLOW, burst=4))
    async with client_of(StaticAccess(USERS), limits) as api:
        # /compare with one uid twice is refused (400) before the database is asked
        bob = [(await api.get(NO_DATABASE, headers=bearer("token-bob"))).status_code for _ in range(4)]
        limited = await api.get(NO_DATABASE, headers=bearer("token-bob"))
        alice = await api.get(NO_DATABASE, headers=bearer("token-alice"))
    assert bob == [400, 400, 400, 400]
    assert limited.status_code == 429
    assert limited.json()["detail"].startswith(
        "too many requests with this bearer token: at most 4 at once and 0.001 a second; retry after"
    )
    assert int(limited.headers["retry-after"]) >= 1
    assert alice.status_code == 400, "another token has its own bucket"


async def test_denials_are_cached_so_a_retried_bad_token_costs_one_review() -> None:
    inner = CountingAccess()
    cached = CachedAccess(inner, ttl_s=30)
    app = create_app(make_engine(NOWHERE), PipelineMetrics(), cached)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        answers = [(await api.get(NO_DATABASE, headers=bearer("stolen"))).status_code for _ in range(5)]
    assert answers == [401] * 5
    assert inner.reviews == 1


def test_a_bucket_refills_at_its_rate_up_to_its_burst() -> None:
    now = [0.0]
    buckets: TokenBuckets[str] = TokenBuckets(Rate(per_s=2.0, burst=3), size=10, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a") == pytest.approx(0.5)
    now[0] += 0.5
    assert buckets.wait("a") == 0.0
    assert buckets.take("a") == 0.0
    now[0] += 100
    assert [buckets.take("a") for _ in range(4)][-1] > 0, "never more than the burst"


def test_the_least_recently_used_buckets_are_dropped_beyond_the_size() -> None:
    buckets: TokenBuckets[int] = TokenBuckets(Rate(per_s=1.0, burst=1), size=2, clock=lambda: 0.0)
    for key in (1, 2, 3):
        buckets.take(key)
    assert 1 not in buckets and 2 in buckets and 3 in buckets
