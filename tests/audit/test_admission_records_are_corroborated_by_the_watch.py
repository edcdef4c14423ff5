"""An admission record from a caller without a client certificate is judged against the watch
stream: verified when the watch shows the change it claims (either order of arrival),
flagged unmatched once the window passes without it (counted, visible in the API), never
silently trusted; a record from the API server's certificate needs no corroboration."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.audit.consumer import CorroborationMetrics, run_corroboration
from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.contract.audit import AuditRecord
from controller.contract.settings import AuditSettings
from controller.metrics import PipelineMetrics
from controller.store import corroboration
from controller.testing import events as eb
from tests.api_fixtures import USERS, bearer
from tests.audit_helpers import T0, audit_record, write

WINDOW = timedelta(minutes=2)


def claimed(n: int, verb: str, caller: str | None = "unverified", at: datetime = T0) -> AuditRecord:
    """Admission record ``n``: ``verb`` of MPIJob team-a/job-<n> at ``at``, as the caller sent it."""
    return audit_record(n, verb=verb, at=at).model_copy(update={"caller": caller})  # type: ignore[arg-type]


def seen(n: int, change: str, at: datetime) -> eb.JobObserved:
    """The watch's observation of MPIJob team-a/job-<n>."""
    run = eb.ref("team-a", f"job-{n}", f"uid-{n}")
    return eb.job("Running", job=run, change=change, observed_at=at, resource_version=f"{n}{change}")  # type: ignore[arg-type]


async def judge(engine: AsyncEngine, now: datetime) -> dict[str, int]:
    async with engine.begin() as conn:
        return dict(await corroboration.decide(conn, now, WINDOW))


async def verdict_of(engine: AsyncEngine, seq: int) -> str | None:
    async with engine.connect() as conn:
        found = await corroboration.verdicts(conn, [seq])
    return found[seq].status if seq in found else None


async def observe(engine: AsyncEngine, *events: eb.JobObserved) -> None:
    async with engine.begin() as conn:
        await corroboration.record_changes(conn, events)


async def test_a_forged_delete_with_no_change_on_the_watch_ends_unmatched(engine: AsyncEngine) -> None:
    (forged,) = await write(engine, [claimed(1, "delete")])

    assert await judge(engine, T0 + timedelta(minutes=1)) == {}, "within the window: still pending"
    assert await verdict_of(engine, forged.seq) is None
    assert await judge(engine, T0 + WINDOW + timedelta(seconds=1)) == {"unmatched": 1}
    assert await verdict_of(engine, forged.seq) == "unmatched"


async def test_the_watch_bears_out_an_update_whichever_arrives_first(engine: AsyncEngine) -> None:
    later, earlier = claimed(1, "update"), claimed(2, "update")
    await observe(engine, seen(2, "MODIFIED", T0 + timedelta(seconds=1)))  # the watch first
    stored = await write(engine, [later, earlier])
    await observe(engine, seen(1, "MODIFIED", T0 + timedelta(seconds=2)))  # the watch after

    assert await judge(engine, T0 + timedelta(seconds=3)) == {"verified": 2}
    assert [await verdict_of(engine, s.seq) for s in stored] == ["verified", "verified"]


async def test_a_change_of_another_kind_or_object_or_too_late_does_not_verify(engine: AsyncEngine) -> None:
    stored = await write(engine, [claimed(1, "delete"), claimed(2, "create")])
    await observe(
        engine,
        seen(1, "MODIFIED", T0),  # the right object, the wrong operation
        seen(3, "ADDED", T0),  # the right operation, another object
        seen(2, "ADDED", T0 + WINDOW + timedelta(minutes=1)),  # too late
    )

    assert await judge(engine, T0 + WINDOW * 3) == {"unmatched": 2}
    assert [await verdict_of(engine, s.seq) for s in stored] == ["unmatched", "unmatched"]


async def test_replicas_judging_at_once_agree_on_one_verdict(engine: AsyncEngine) -> None:
    (record,) = await write(engine, [claimed(1, "delete")])
    outcomes = await asyncio.gather(*(judge(engine, T0 + WINDOW * 2) for _ in range(4)))

    assert sum(o.get("unmatched", 0) for o in outcomes) == 1
    async with engine.connect() as conn:
        count = (await conn.execute(text("SELECT count(*) FROM admission_corroborations"))).scalar_one()
    assert count == 1 and await verdict_of(engine, record.seq) == "unmatched"


async def test_the_api_shows_each_records_standing_and_the_loop_counts_unmatched(engine: AsyncEngine) -> None:
    now = datetime.now(T0.tzinfo)
    await write(
        engine,
        [
            claimed(1, "delete", at=now - timedelta(minutes=5)),  # never seen: unmatched
            claimed(2, "update", at=now),  # seen below: verified
            claimed(3, "create", at=now),  # not yet: pending
            claimed(4, "create", caller="mtls", at=now),  # the API server's certificate
            audit_record(5, verb="failed", at=now),  # lifecycle: not an admission claim
        ],
    )
    await observe(engine, seen(2, "MODIFIED", now))
    metrics = PipelineMetrics()
    counted = CorroborationMetrics.on(metrics.registry)
    stop = asyncio.Event()
    settings = AuditSettings(corroboration_window_s=WINDOW.total_seconds(), corroboration_interval_s=0.05)
    loop = asyncio.create_task(
        run_corroboration(engine, settings, stop, lambda: datetime.now(T0.tzinfo), counted)
    )
    try:
        for _ in range(200):
            if counted.sample("mpijc_admission_corroborations_total", status="verified"):
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await loop

    app = create_app(engine, metrics, StaticAccess(USERS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        page = (await api.get("/api/v1/audit", headers=bearer("token-admin"))).json()

    standing = {item["record"]["id"]: item["corroboration"] for item in page["items"]}
    assert standing == {
        "test/1": "unmatched",
        "test/2": "verified",
        "test/3": "pending",
        "test/4": "authenticated",
        "test/5": None,
    }
    assert counted.sample("mpijc_admission_corroborations_total", status="unmatched") == 1
    assert counted.sample("mpijc_admission_corroborations_total", status="verified") == 1
    assert counted.sample("mpijc_admission_uncorroborated") == 1
