"""Every error the API answers is RFC 9457 problem details: ``application/problem+json`` with
``type``, ``title``, ``status``, ``detail`` and ``instance`` — a route's own refusal, the
router's 404 and 405, a validation error (422), the body gate's 413 and the rate limit's 429 —
and ``detail`` keeps the name and value clients read before.

No database is needed: everything here is answered before a route touches one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from http import HTTPStatus
from typing import Any

import httpx
import pytest

from controller.api.app import create_app
from controller.api.limits import DEFAULT_LIMITS, Rate
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from tests.api_fixtures import CountingAccess, bearer

NOWHERE = "postgresql://nobody@127.0.0.1:1/none"


@pytest.fixture
async def api() -> AsyncIterator[httpx.AsyncClient]:
    limits = replace(DEFAULT_LIMITS, max_body_bytes=1024, per_address_failures=Rate(per_s=0.001, burst=3))
    app = create_app(make_engine(NOWHERE), PipelineMetrics(), CountingAccess(), limits=limits)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as client:
        yield client


def problem(answer: httpx.Response, status: int, path: str) -> Any:
    """The answer's problem details, checked against RFC 9457's members; its ``detail``."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    assert body["type"] == "about:blank"
    assert body["title"] == HTTPStatus(status).phrase
    assert body["status"] == status
    assert body["instance"] == path
    return body["detail"]


async def test_an_unknown_path_is_a_404_problem(api: httpx.AsyncClient) -> None:
    assert problem(await api.get("/api/v1/nothing"), 404, "/api/v1/nothing") == "Not Found"


async def test_a_wrong_method_is_a_405_problem_listing_every_allowed_method(api: httpx.AsyncClient) -> None:
    answer = await api.delete("/api/v1/webhooks")
    assert problem(answer, 405, "/api/v1/webhooks") == "Method Not Allowed"
    assert answer.headers["allow"] == "GET, POST"


async def test_a_missing_token_is_a_401_problem_with_its_challenge(api: httpx.AsyncClient) -> None:
    answer = await api.get("/api/v1/runs")
    assert problem(answer, 401, "/api/v1/runs") == "a bearer token is required"
    assert answer.headers["www-authenticate"] == "Bearer"


async def test_an_invalid_parameter_is_a_422_problem_naming_it(api: httpx.AsyncClient) -> None:
    answer = await api.get("/api/v1/runs", params={"limit": "many"}, headers=bearer("token-admin"))
    (invalid,) = problem(answer, 422, "/api/v1/runs")
    assert invalid["loc"] == ["query", "limit"]


async def test_a_body_over_the_limit_is_a_413_problem_from_the_gate(api: httpx.AsyncClient) -> None:
    answer = await api.post(
        "/api/v1/webhooks", content=b"x" * 2048, headers={"content-type": "application/json"}
    )
    assert "larger than 1024 bytes" in problem(answer, 413, "/api/v1/webhooks")


async def test_too_many_failed_logins_are_a_429_problem_with_retry_after(api: httpx.AsyncClient) -> None:
    for _ in range(3):
        await api.get("/api/v1/runs", headers=bearer("wrong"))
    answer = await api.get("/api/v1/runs", headers=bearer("wrong"))
    problem(answer, 429, "/api/v1/runs")
    assert int(answer.headers["retry-after"]) >= 1
