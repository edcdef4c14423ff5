"""The runs list: every filter narrows it, the cursor walks it without gaps or repeats."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api_fixtures import ADMIN, T0, insert_runs, run_row


@pytest.fixture
async def runs(engine: AsyncEngine) -> list[dict[str, object]]:
    rows = [
        run_row("team-a", "pi", T0, labels={"exp": "1", "team": "a"}, attempt=1),
        run_row(
            "team-a",
            "pi",
            T0 + timedelta(hours=1),
            phase="Failed",
            labels={"exp": "2", "team": "a"},
            attempt=2,
        ),
        run_row(
            "team-a", "bert", T0 + timedelta(hours=2), kind="TrainJob", phase="Running", labels={"team": "a"}
        ),
        run_row("team-b", "pi", T0 + timedelta(hours=3), phase="Pending", labels={"team": "b"}),
        run_row(
            "shared", "llama", T0 + timedelta(hours=4), kind="TrainJob", labels={"team": "b", "exp": "1"}
        ),
    ]
    await insert_runs(engine, rows)
    return rows


async def names(api: httpx.AsyncClient, **params: object) -> list[str]:
    response = await api.get("/api/v1/runs", params=params, headers=ADMIN)  # type: ignore[arg-type]
    assert response.status_code == 200, response.text
    return [f"{r['namespace']}/{r['name']}" for r in response.json()["items"]]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, ["shared/llama", "team-b/pi", "team-a/bert", "team-a/pi", "team-a/pi"]),
        ({"namespace": "team-a"}, ["team-a/bert", "team-a/pi", "team-a/pi"]),
        ({"kind": "TrainJob"}, ["shared/llama", "team-a/bert"]),
        ({"phase": "Failed"}, ["team-a/pi"]),
        ({"name": "pi"}, ["team-b/pi", "team-a/pi", "team-a/pi"]),
        ({"label": "exp=1"}, ["shared/llama", "team-a/pi"]),
        ({"label": ["team=b", "exp=1"]}, ["shared/llama"]),
        ({"created_after": "2026-11-20T12:00:00Z"}, ["shared/llama", "team-b/pi", "team-a/bert"]),
        ({"created_before": "2026-11-20T11:00:00+00:00"}, ["team-a/pi"]),
        (
            {"created_after": "2026-11-20T12:00:00+01:00", "created_before": "2026-11-20T13:00:00Z"},
            ["team-a/bert", "team-a/pi"],
        ),
        ({"namespace": "team-a", "kind": "MPIJob", "phase": "Succeeded"}, ["team-a/pi"]),
        ({"namespace": "nowhere"}, []),
    ],
    ids=lambda value: str(value) if isinstance(value, dict) else "",
)
async def test_filters_narrow_the_list(
    api: httpx.AsyncClient, runs: list[dict[str, object]], params: dict[str, object], expected: list[str]
) -> None:
    assert await names(api, **params) == expected


async def test_cursor_walks_every_run_once(api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    same_time = T0 + timedelta(days=1)
    rows = [run_row("team-a", f"job-{i}", T0 + timedelta(minutes=i)) for i in range(23)]
    rows += [
        run_row("team-a", f"tie-{i}", same_time) for i in range(4)
    ]  # equal created_at: uid breaks the tie
    await insert_runs(engine, rows)

    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 5, **({"cursor": cursor} if cursor else {})}
        page = (await api.get("/api/v1/runs", params=params, headers=ADMIN)).json()
        seen += [r["uid"] for r in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 6
    assert len(seen) == len(set(seen)) == len(rows)
    created = {r["uid"]: (r["created_at"], r["uid"]) for r in rows}
    assert seen == sorted(seen, key=lambda uid: created[uid], reverse=True)


async def test_last_full_page_has_no_cursor(api: httpx.AsyncClient, runs: list[dict[str, object]]) -> None:
    page = (await api.get("/api/v1/runs", params={"limit": 5}, headers=ADMIN)).json()
    assert len(page["items"]) == 5 and page["next_cursor"] is None


async def test_attempts_of_one_job_name(api: httpx.AsyncClient, runs: list[dict[str, object]]) -> None:
    response = await api.get("/api/v1/namespaces/team-a/jobs/pi/runs", headers=ADMIN)
    assert response.status_code == 200
    assert [(r["name"], r["attempt"], r["phase"]) for r in response.json()["items"]] == [
        ("pi", 2, "Failed"),
        ("pi", 1, "Succeeded"),
    ]


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [
        ({"cursor": "bm90LWEtY3Vyc29y"}, 400, "cursor is not valid"),
        ({"cursor": "!!"}, 422, "cursor"),
        ({"limit": 0}, 422, "limit"),
        ({"limit": 501}, 422, "limit"),
        ({"kind": "Deployment"}, 422, "kind"),
        ({"phase": "Exploded"}, 422, "phase"),
        ({"namespace": "Team_A"}, 422, "namespace"),
        ({"label": "no-equals-sign"}, 422, "label"),
        ({"created_after": "yesterday"}, 422, "created_after"),
        ({"created_after": "0.5"}, 422, "RFC 3339"),
        ({"created_after": "2026-11-20T10:00:00"}, 422, "with an offset"),
        ({"created_after": "2026-11-20T10:00:00 01:00"}, 422, "%2B"),
        ({"namspace": "team-a"}, 400, "unknown query parameter(s): 'namspace'"),
        ({"created_after": "0.5"}, 422, "RFC 3339"),
        ({"created_after": "2026-11-20T10:00:00"}, 422, "with an offset"),
        ({"created_after": "2026-11-20T10:00:00 01:00"}, 422, "%2B"),
        ({"namspace": "team-a"}, 400, "unknown query parameter(s): 'namspace'"),
        ({"created_after": "0001-01-01T00:00:00+05:00"}, 422, "out of range"),
        ({"name": "a\x00b"}, 422, "name"),
    ],
    ids=lambda value: str(value) if isinstance(value, dict) else "",
)
async def test_bad_parameters_are_named_in_a_4xx(
    api: httpx.AsyncClient, params: dict[str, object], status: int, says: str
) -> None:
    response = await api.get("/api/v1/runs", params=params, headers=ADMIN)  # type: ignore[arg-type]
    assert response.status_code == status
    assert says in response.text
