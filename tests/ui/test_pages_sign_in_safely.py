"""Signing in to the pages: a token given in a form becomes an HttpOnly, SameSite=Strict session
cookie, taken only from this site's own pages and only for reading; OpenShift's forwarded access
token counts only on the OAuth proxy's listener; a bad filter is a 400 page, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.auth import SESSION_COOKIE, ForwardedTokens
from controller.metrics import PipelineMetrics
from tests.api_fixtures import USERS, job_story, store

SITE = "http://api"
SAME_SITE = {"Origin": SITE}


def _client(engine: AsyncEngine, *, proxy_listener: bool = False) -> httpx.AsyncClient:
    reviewer = StaticAccess(USERS)
    app = create_app(engine, PipelineMetrics(), reviewer)
    served = ForwardedTokens(app, reviewer) if proxy_listener else app
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=served), base_url=SITE)


@pytest.fixture
async def ui(engine: AsyncEngine) -> AsyncIterator[httpx.AsyncClient]:
    _, story = job_story("llm")
    await store(engine, story)
    async with _client(engine) as client:
        yield client


async def test_a_page_sends_a_stranger_to_sign_in_and_back(ui: httpx.AsyncClient) -> None:
    answer = await ui.get("/ui/jobs?phase=Failed")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/sign-in?next=%2Fui%2Fjobs%3Fphase%3DFailed"
    form = await ui.get(answer.headers["location"])
    assert 'name="next" value="/ui/jobs?phase=Failed"' in form.text
    assert "default-src 'none'" in form.headers["content-security-policy"]


async def test_sign_in_sets_a_strict_http_only_cookie_that_reads_but_never_writes(
    ui: httpx.AsyncClient,
) -> None:
    form = {"token": "token-alice", "next": "/ui/jobs?phase=Failed"}
    answer = await ui.post("/ui/sign-in", data=form, headers=SAME_SITE)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/jobs?phase=Failed"
    cookie = answer.headers["set-cookie"]
    assert cookie.startswith(f"{SESSION_COOKIE}=token-alice;")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert "Secure" not in cookie  # plain http here; https gets Secure
    page = await ui.get("/ui/jobs")
    assert (
        page.status_code == 200 and "Signed in as <strong>alice</strong>" in page.text and "llm" in page.text
    )
    assert (await ui.get("/api/v1/runs")).status_code == 200  # the pages' script reads the JSON routes
    hook = {"channel": "webhook", "url": "http://127.0.0.1:9/x", "namespace": "team-a"}
    refused = await ui.post("/api/v1/webhooks", json=hook)  # a cookie never authorizes a change
    assert refused.status_code == 401
    out = await ui.post("/ui/sign-out", headers=SAME_SITE)
    assert out.status_code == 303 and f'{SESSION_COOKIE}=""' in out.headers["set-cookie"]
    assert (await ui.get("/ui/jobs")).status_code == 303


@pytest.mark.parametrize("origin", [None, "null", "http://evil.example", "http://api.evil.example"])
async def test_sign_in_only_from_this_sites_pages(ui: httpx.AsyncClient, origin: str | None) -> None:
    headers = {"Origin": origin} if origin else {}
    answer = await ui.post("/ui/sign-in", data={"token": "token-alice"}, headers=headers)
    assert answer.status_code == 403 and "set-cookie" not in answer.headers
    assert answer.json()["detail"] == "a sign-in or sign-out is accepted only from this site's own pages"


async def test_a_refused_token_is_told_and_sets_nothing(ui: httpx.AsyncClient) -> None:
    answer = await ui.post("/ui/sign-in", data={"token": "guess"}, headers=SAME_SITE)
    assert answer.status_code == 401 and "That token was not accepted." in answer.text
    assert "set-cookie" not in answer.headers


@pytest.mark.parametrize(
    "target", ["https://evil.example/ui/jobs", "//evil.example/ui/", "/api/v1/runs", "/ui//x"]
)
async def test_sign_in_goes_back_only_to_a_page_of_this_site(ui: httpx.AsyncClient, target: str) -> None:
    answer = await ui.post("/ui/sign-in", data={"token": "token-alice", "next": target}, headers=SAME_SITE)
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/jobs"


async def test_the_forwarded_access_token_counts_only_on_the_proxys_listener(engine: AsyncEngine) -> None:
    forwarded = {"X-Forwarded-Access-Token": "token-alice"}
    async with _client(engine) as plain:
        refused = await plain.get("/api/v1/runs", headers=forwarded)
        assert refused.status_code == 401 and "MPIJC_API__FORWARDED_TOKEN_PORT" in refused.json()["detail"]
        assert (await plain.get("/ui/jobs", headers=forwarded)).status_code == 303
    async with _client(engine, proxy_listener=True) as behind_proxy:
        assert (await behind_proxy.get("/api/v1/runs", headers=forwarded)).status_code == 200
        page = await behind_proxy.get("/ui/jobs", headers=forwarded)
        assert page.status_code == 200 and "alice" in page.text


@pytest.mark.parametrize(
    ("query", "detail"),
    [
        ("kind=Nope", "kind: Input should be"),
        ("phase=Lost", "phase: Input should be"),
        ("from=2026-13-01", "from: Input should be a valid date"),
        ("namespace=Not_A_Label", "namespace:"),
    ],
)
async def test_a_bad_filter_is_a_400_page(ui: httpx.AsyncClient, query: str, detail: str) -> None:
    await ui.post("/ui/sign-in", data={"token": "token-alice"}, headers=SAME_SITE)
    answer = await ui.get(f"/ui/jobs?{query}")
    assert answer.status_code == 400 and answer.headers["content-type"].startswith("text/html")
    assert detail in answer.text
