"""An object in a namespace the caller may not read is answered exactly like one that does not exist.

A 403 naming the namespace would confirm the run (or subscription) exists and say where; so
runs, their timelines and findings, comparisons, subscriptions, their delivery logs and
redeliveries answer 404 with the same body as for an id nobody has. Lists of a namespace the
caller names may answer 403, but the same 403 whether or not anything is there.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api_fixtures import T0, bearer, insert_runs, run_row

BOB = bearer("token-bob")  # reads team-b and shared, not team-a


@pytest.fixture
async def hidden(engine: AsyncEngine) -> str:
    """A run in team-a, which bob may not read."""
    row = run_row("team-a", "pi", T0)
    await insert_runs(engine, [row, run_row("team-b", "pi", T0 + timedelta(minutes=1))])
    return str(row["uid"])


def same_shape(uid: str, other: str, answer: httpx.Response) -> tuple[int, str, str]:
    return answer.status_code, answer.headers["content-type"], answer.text.replace(uid, other)


@pytest.mark.parametrize("suffix", ["", "/timeline", "/findings"])
async def test_a_run_bob_may_not_read_is_404_like_a_missing_one(
    api: httpx.AsyncClient, hidden: str, suffix: str
) -> None:
    missing = str(uuid.uuid4())  # same length as a real uid
    there = await api.get(f"/api/v1/runs/{hidden}{suffix}", headers=BOB)
    nowhere = await api.get(f"/api/v1/runs/{missing}{suffix}", headers=BOB)
    assert there.status_code == 404
    assert there.json()["detail"] == f"no run with uid {hidden!r}"
    assert same_shape(hidden, missing, there) == same_shape(missing, missing, nowhere)
    assert "team-a" not in there.text


async def test_a_comparison_with_a_run_bob_may_not_read_is_404_like_a_missing_one(
    api: httpx.AsyncClient, hidden: str, engine: AsyncEngine
) -> None:
    mine = run_row("shared", "pi", T0 + timedelta(minutes=2))
    await insert_runs(engine, [mine])
    missing = str(uuid.uuid4())
    there = await api.get(f"/api/v1/compare?runs={mine['uid']},{hidden}", headers=BOB)
    nowhere = await api.get(f"/api/v1/compare?runs={mine['uid']},{missing}", headers=BOB)
    assert there.status_code == 404
    assert there.json()["detail"] == f"no run with uid {hidden!r}"
    assert same_shape(hidden, missing, there) == same_shape(missing, missing, nowhere)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs?namespace={ns}",
        "/api/v1/namespaces/{ns}/jobs/pi/runs",
        "/api/v1/namespaces/{ns}/jobs/pi/trends",
    ],
)
async def test_a_list_of_an_unreadable_namespace_is_the_same_403_whether_or_not_it_has_runs(
    api: httpx.AsyncClient, hidden: str, path: str
) -> None:
    populated = await api.get(path.format(ns="team-a"), headers=BOB)
    empty = await api.get(path.format(ns="team-z"), headers=BOB)
    assert populated.status_code == empty.status_code == 403
    assert populated.text.replace("team-a", "team-z") == empty.text
