"""The job list: every kind in one list, filtered by kind, phase, namespace and creation dates,
sorted by a column, paged with a link to the next page; only namespaces the caller may read."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta
from html import unescape

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api_fixtures import T0, insert_runs, run_row
from tests.ui.test_pages_sign_in_safely import SAME_SITE, _client

ROWS = [
    run_row("team-a", "bert", T0, kind="PyTorchJob", phase="Failed"),
    run_row("team-a", "llama", T0 + timedelta(days=1), kind="MPIJob", phase="Running"),
    run_row("team-a", "gpt", T0 + timedelta(days=2), kind="TrainJob", phase="Succeeded"),
    run_row("team-b", "secret", T0 + timedelta(days=1), kind="MPIJob", phase="Failed"),
]


@pytest.fixture
async def alice(engine: AsyncEngine) -> AsyncIterator[httpx.AsyncClient]:
    await insert_runs(engine, ROWS)
    async with _client(engine) as client:
        await client.post("/ui/sign-in", data={"token": "token-alice"}, headers=SAME_SITE)
        yield client


def names(page: httpx.Response) -> list[str]:
    assert page.status_code == 200, page.text
    return re.findall(r'<tr data-uid="[^"]+">\s*<td><a href="/ui/runs/[^"]+">([^<]+)</a>', page.text)


async def test_every_kind_in_one_list_newest_first_of_readable_namespaces_only(
    alice: httpx.AsyncClient,
) -> None:
    assert names(await alice.get("/ui/jobs")) == ["gpt", "llama", "bert"]  # never team-b's


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        ("kind=PyTorchJob", ["bert"]),
        ("phase=Running", ["llama"]),
        ("namespace=team-a&kind=TrainJob", ["gpt"]),
        ("from=2026-11-21&to=2026-11-21", ["llama"]),  # a UTC day, "to" included
        ("from=2026-11-21", ["gpt", "llama"]),
        ("kind=&phase=&namespace=", ["gpt", "llama", "bert"]),  # an empty field filters nothing
        ("sort=name&order=asc", ["bert", "gpt", "llama"]),
        ("sort=phase&order=desc", ["gpt", "llama", "bert"]),
    ],
)
async def test_filters_and_sorts(alice: httpx.AsyncClient, query: str, shown: list[str]) -> None:
    assert names(await alice.get(f"/ui/jobs?{query}")) == shown


async def test_another_namespace_named_is_refused_as_the_route_refuses_it(alice: httpx.AsyncClient) -> None:
    page = await alice.get("/ui/jobs?namespace=team-b")
    assert (
        page.status_code == 403
        and "may not list MPIJobs or TrainJobs in namespace &#39;team-b&#39;" in page.text
    )


async def test_pages_follow_each_other_with_their_filters(alice: httpx.AsyncClient) -> None:
    seen: list[str] = []
    address: str | None = "/ui/jobs?limit=1&namespace=team-a"
    while address is not None:
        page = await alice.get(address)
        seen += names(page)
        found = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page.text)
        address = unescape(found.group(1)) if found else None
        if address is not None:
            assert "namespace=team-a" in address and "limit=1" in address  # the filters go along
    assert seen == ["gpt", "llama", "bert"]
