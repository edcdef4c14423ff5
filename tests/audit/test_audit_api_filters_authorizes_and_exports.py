"""``/api/v1/audit``: filters, cursor pages, streaming export and verification, through the auth seam."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api import audit as audit_api
from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.contract.audit import Actor
from controller.contract.events import JobRef
from controller.contract.settings import StaticUser
from controller.metrics import PipelineMetrics
from controller.store.auditchain import StoredRecord, purge
from controller.store.auditformats import cef, jsonl_line
from controller.store.history import apply_events
from controller.testing.events import job
from tests.audit_helpers import T0, audit_record, write

TOKENS = {
    "t-admin": StaticUser(username="admin", namespaces=["*"]),
    "t-alice": StaticUser(username="alice", namespaces=["team-a"]),
}
ADMIN = {"Authorization": "Bearer t-admin"}
ALICE = {"Authorization": "Bearer t-alice"}
DAY = timedelta(days=1)


@pytest.fixture
async def client(engine: AsyncEngine, metrics: PipelineMetrics) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(engine, metrics, StaticAccess(TOKENS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        yield c


@pytest.fixture
async def trail(engine: AsyncEngine) -> list[StoredRecord]:
    """Runs in team-a and team-b (what the auth seam lists namespaces from) and their audit trail:
    seq 1-6 alternate team-a/team-b an hour apart (events at T0 + n min), then a purge record."""
    async with engine.begin() as conn:
        await apply_events(
            conn,
            [
                job(job=JobRef(uid=f"run-{ns}", kind="MPIJob", namespace=ns, name="pi"))
                for ns in ("team-a", "team-b")
            ],
        )
    old = await write(engine, [audit_record(0, namespace="team-a", user="bob@example.com")], T0 - 40 * DAY)
    links = await write(
        engine,
        [
            audit_record(
                n,
                namespace="team-a" if n % 2 else "team-b",
                verb="failed" if n == 5 else "create",
                user=None if n == 5 else "alice@example.com",
                reason="MPIJobFailed" if n == 5 else None,
            )
            for n in range(1, 7)
        ],
        T0,
    )
    async with engine.begin() as conn:
        purged = await purge(conn, 30, Actor(username="ops"), T0)
    assert purged.record is not None and old
    return [*links, purged.record]


def seqs(body: dict[str, Any]) -> list[int]:
    return [item["seq"] for item in body["items"]]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", [8, 7, 6, 5, 4, 3, 2]),
        ("namespace=team-a", [6, 4, 2]),
        ("verb=failed", [6]),
        ("user=alice@example.com&namespace=team-b", [7, 5, 3]),
        ("uid=uid-3", [4]),
        ("since=2026-11-23T09:02:00Z&until=2026-11-23T09:05:00Z", [5, 4, 3]),
        ("since=2026-11-23T10:02:00%2B01:00", [7, 6, 5, 4, 3]),
        ("verb=purge", [8]),
    ],
    ids=["all", "namespace", "verb", "user", "run-uid", "time-range", "other-timezone", "purges"],
)
async def test_filters(
    client: httpx.AsyncClient, trail: list[StoredRecord], query: str, expected: list[int]
) -> None:
    response = await client.get(f"/api/v1/audit?{query}", headers=ADMIN)
    assert response.status_code == 200, response.text
    assert seqs(response.json()) == expected


async def test_items_are_the_verifiable_links(client: httpx.AsyncClient, trail: list[StoredRecord]) -> None:
    body = (await client.get("/api/v1/audit?verb=failed", headers=ADMIN)).json()
    (item,) = body["items"]
    assert item == {  # not an admission claim
        **json.loads(jsonl_line(trail[4])),
        "corroboration": None,
        "corroboration_detail": None,
    }
    assert item["record"]["reason"] == "MPIJobFailed" and item["record"]["actor"] is None


async def test_pages_follow_the_cursor_to_the_end(
    client: httpx.AsyncClient, trail: list[StoredRecord]
) -> None:
    seen: list[int] = []
    url = "/api/v1/audit?limit=3"
    while True:
        body = (await client.get(url, headers=ADMIN)).json()
        seen += seqs(body)
        if body["next_cursor"] is None:
            break
        url = f"/api/v1/audit?limit=3&cursor={body['next_cursor']}"
    assert seen == [8, 7, 6, 5, 4, 3, 2]


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ("since=2026-11-23T09:00:00", 422, "with a timezone"),
        ("until=2026-11-23", 422, "with a timezone"),
        ("since=2026-11-23T10:00:00Z&until=2026-11-23T09:00:00Z", 400, "must be before until"),
        ("cursor=not-a-cursor", 400, "cursor is not valid"),
        ("cursor=c2VxOi0x", 400, "cursor is not valid"),
        ("since=yesterday", 422, "RFC 3339"),
        ("limit=0", 422, "greater than or equal to 1"),
        ("limit=5000", 422, "less than or equal to 500"),
        ("verb=explode", 422, "'create', 'update', 'delete'"),
        ("namespace=", 422, "at least 1 character"),
    ],
    ids=[
        "naive-since",
        "naive-until",
        "empty-range",
        "bad-cursor",
        "negative-cursor",
        "unparsable",
        "limit-0",
        "limit-big",
        "verb",
        "empty-namespace",
    ],
)
async def test_bad_parameters_are_4xx_that_say_why(
    client: httpx.AsyncClient, trail: list[StoredRecord], query: str, status: int, message: str
) -> None:
    response = await client.get(f"/api/v1/audit?{query}", headers=ADMIN)
    assert response.status_code == status
    assert message in json.dumps(response.json()["detail"])


async def test_a_namespace_reader_sees_only_that_namespace(
    client: httpx.AsyncClient, trail: list[StoredRecord]
) -> None:
    mine = await client.get("/api/v1/audit", headers=ALICE)
    assert seqs(mine.json()) == [6, 4, 2], "team-b records and the cluster-wide purge record are hidden"

    theirs = await client.get("/api/v1/audit?namespace=team-b", headers=ALICE)
    assert theirs.status_code == 403
    assert theirs.json()["detail"] == "alice may not list MPIJobs or TrainJobs in namespace 'team-b'"

    export = await client.get("/api/v1/audit/export", headers=ALICE)
    assert [json.loads(line)["seq"] for line in export.text.splitlines()] == [2, 4, 6]

    verify = await client.get("/api/v1/audit/verify", headers=ALICE)
    assert verify.status_code == 403
    assert "needs read access to every namespace" in verify.json()["detail"]

    assert (await client.get("/api/v1/audit")).status_code == 401


async def test_export_streams_jsonl_in_chain_order(client: httpx.AsyncClient, engine: AsyncEngine) -> None:
    links = await write(engine, [audit_record(n) for n in range(1, audit_api.EXPORT_PAGE + 21)], T0)
    async with client.stream("GET", "/api/v1/audit/export?format=jsonl", headers=ADMIN) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        assert response.headers["content-disposition"] == 'attachment; filename="audit.jsonl"'
        body = b"".join([chunk async for chunk in response.aiter_bytes()])
    assert body == b"".join(jsonl_line(s) for s in links)


async def test_export_as_cef_with_filters(client: httpx.AsyncClient, trail: list[StoredRecord]) -> None:
    response = await client.get(
        "/api/v1/audit/export?format=cef&namespace=team-b&until=2026-11-23T09:05:00Z", headers=ADMIN
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text.splitlines() == [cef(trail[i]) for i in (1, 3)]


async def test_export_format_must_be_known(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/audit/export?format=xml", headers=ADMIN)
    assert response.status_code == 422
    assert "'jsonl' or 'cef'" in json.dumps(response.json()["detail"])


async def test_verify_reports_the_first_broken_record(
    client: httpx.AsyncClient, trail: list[StoredRecord], database_url: str
) -> None:
    intact = (await client.get("/api/v1/audit/verify", headers=ADMIN)).json()
    assert intact == {
        "ok": True,
        "checked": 7,
        "first_seq": 2,
        "last_seq": 8,
        "head_hash": trail[-1].hash,
        "anchor": "purge record 8",
        "broken": None,
    }

    db = await asyncpg.connect(database_url)
    try:
        await db.execute("ALTER TABLE audit_records DISABLE TRIGGER audit_records_append_only")
        await db.execute(
            "UPDATE audit_records SET record = jsonb_set(record, '{outcome}', '\"denied\"') WHERE seq = 4"
        )
        await db.execute("ALTER TABLE audit_records ENABLE TRIGGER audit_records_append_only")
    finally:
        await db.close()

    broken = (await client.get("/api/v1/audit/verify", headers=ADMIN)).json()
    assert broken["ok"] is False
    assert broken["broken"] == {
        "seq": 4,
        "reason": "the record does not match its hash: it was changed after it was written",
    }
    assert (broken["checked"], broken["last_seq"]) == (2, 3)
