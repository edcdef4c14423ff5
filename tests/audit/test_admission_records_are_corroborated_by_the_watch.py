"""Every admission record, whatever its ``caller``, is judged against the watch stream: by the
object uid it names, by the change it claims against the change the watch saw (a status update
bears out no scale, another uid's delete no delete), and one watched change bears out one record.
The webhook's real records and the watcher's real observations of the same objects are compared."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.audit.consumer import CorroborationMetrics, run_corroboration
from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.contract.audit import AuditRecord
from controller.contract.events import JobObserved
from controller.contract.settings import AuditSettings
from controller.metrics import PipelineMetrics
from controller.store import corroboration, migrate
from controller.testing.objects import mpijob, next_rv
from tests.api_fixtures import USERS, bearer
from tests.audit_helpers import T0, admission_review, audit_record, parse_cef, trainjob, write
from watchers.admission.reviews import review
from watchers.normalizing import normalize_job

WINDOW = timedelta(minutes=2)
UID = "5d8e2f10-train-b"
Obj = dict[str, Any]


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def train_b(workers: int = 4, uid: str = UID) -> Obj:
    """MPIJob team-a/train-b as the API server stores it, created an hour before :data:`T0`."""
    return mpijob("train-b", "team-a", workers, uid=uid, created=stamp(T0 - timedelta(hours=1)))


def changed(
    obj: Obj,
    *,
    workers: int | None = None,
    image: str | None = None,
    labels: Obj | None = None,
    status: bool = False,
) -> Obj:
    """The next version of ``obj``: a spec change raises the generation, status and metadata do not."""
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = next_rv()
    worker = new["spec"]["mpiReplicaSpecs"]["Worker"]
    if workers is not None:
        worker["replicas"] = workers
    if image is not None:
        worker["template"]["spec"]["containers"][0]["image"] = image
    if workers is not None or image is not None:
        new["metadata"]["generation"] += 1
    if labels is not None:
        new["metadata"]["labels"] = labels
    if status:
        new["status"] = {"conditions": [{"type": "Running", "status": "True", "reason": "MPIJobRunning"}]}
    return new


def claim(operation: str, new: Obj, old: Obj | None = None, *, caller: str = "unverified") -> AuditRecord:
    """The record the webhook makes of an AdmissionReview (from the API server, or forged) at T0."""
    body = json.dumps(admission_review(operation, new, old=old)).encode()
    record = review(body, T0, caller=caller).record  # type: ignore[arg-type]
    assert record is not None
    return record


def seen(obj: Obj, change: str, at: datetime) -> JobObserved:
    """What the job watcher publishes for ``obj``."""
    return normalize_job(obj, change, at)  # type: ignore[arg-type]


async def observe(engine: AsyncEngine, *events: JobObserved) -> None:
    async with engine.begin() as conn:
        await corroboration.record_changes(conn, events)


async def judge(engine: AsyncEngine, now: datetime) -> dict[str, int]:
    async with engine.begin() as conn:
        decided = await corroboration.decide(conn, now, WINDOW)
    counts: dict[str, int] = {}
    for d in decided:
        counts[d.status] = counts.get(d.status, 0) + 1
    return counts


async def verdict(engine: AsyncEngine, seq: int) -> corroboration.CorroborationVerdict | None:
    async with engine.connect() as conn:
        return (await corroboration.verdicts(conn, [seq])).get(seq)


async def status(engine: AsyncEngine, seq: int) -> str | None:
    found = await verdict(engine, seq)
    return found.status if found else None


DUE = T0 + WINDOW + timedelta(seconds=1)


async def test_a_forged_scale_is_contradicted_by_a_status_update(engine: AsyncEngine) -> None:
    before = train_b(4)
    (forged,) = await write(engine, [claim("UPDATE", changed(before, workers=64), before)])
    assert forged.record.changes == ("spec.mpiReplicaSpecs.Worker.replicas",)
    await observe(
        engine,
        seen(before, "ADDED", T0 - timedelta(hours=1)),
        seen(changed(before, status=True), "MODIFIED", T0 + timedelta(seconds=2)),  # the operator's status
    )

    assert await judge(engine, T0 + timedelta(seconds=5)) == {}, "a status update verifies no scale"
    assert await judge(engine, DUE) == {"contradicted": 1}
    found = await verdict(engine, forged.seq)
    assert found is not None and found.status == "contradicted"
    assert "spec.mpiReplicaSpecs.Worker.replicas" in (found.detail or "")
    assert "generation 1 → 1" in (found.detail or "")


async def test_the_real_scale_is_verified_at_once(engine: AsyncEngine) -> None:
    before = train_b(4)
    after = changed(before, workers=64)
    (real,) = await write(engine, [claim("UPDATE", after, before)])
    await observe(engine, seen(before, "ADDED", T0 - timedelta(hours=1)), seen(after, "MODIFIED", T0))

    assert await judge(engine, T0 + timedelta(seconds=1)) == {"verified": 1}
    found = await verdict(engine, real.seq)
    assert found is not None and found.observed_at == T0
    assert "worker.replicas 4 → 64" in (found.detail or "")


async def test_a_claim_that_does_not_name_what_changed_is_contradicted(engine: AsyncEngine) -> None:
    before = train_b(4)
    relabelled = changed(before, labels={"team": "a", "priority": "high"})
    await write(
        engine,
        [
            claim("UPDATE", relabelled, before),  # claims a label: the watch saw a scale
            claim(
                "UPDATE", changed(before, image="evil:1"), before
            ),  # claims an image: the watch saw a scale
        ],
    )
    await observe(
        engine,
        seen(before, "ADDED", T0 - timedelta(hours=1)),
        seen(changed(before, workers=64), "MODIFIED", T0),
    )
    async with engine.begin() as conn:
        decided = await corroboration.decide(conn, DUE, WINDOW)
    assert [d.status for d in decided] == ["contradicted", "contradicted"]
    assert "changed the spec (generation 1 → 2; worker.replicas 4 → 64)" in decided[0].detail
    assert "worker.replicas 4 → 64, which the record does not claim" in decided[1].detail


async def test_a_label_change_is_verified_by_the_label_and_nothing_else(engine: AsyncEngine) -> None:
    before = train_b(4)
    after = changed(before, labels={"team": "a", "priority": "high"})
    stored = await write(
        engine, [claim("UPDATE", after, before), claim("UPDATE", changed(before, labels={}), before)]
    )
    await observe(engine, seen(before, "ADDED", T0 - timedelta(hours=1)), seen(after, "MODIFIED", T0))

    assert await judge(engine, DUE) == {"verified": 1, "contradicted": 1}
    assert [await status(engine, s.seq) for s in stored] == ["verified", "contradicted"]


async def test_a_claim_the_watch_cannot_see_is_unobservable(engine: AsyncEngine) -> None:
    before = train_b(4)
    annotated = copy.deepcopy(before)
    annotated["metadata"]["annotations"] = {"owner": "alice"}
    (record,) = await write(engine, [claim("UPDATE", annotated, before)])
    assert record.record.changes == ("metadata.annotations",)
    await observe(
        engine,
        seen(before, "ADDED", T0 - timedelta(hours=1)),
        seen(changed(before, status=True), "MODIFIED", T0),
    )

    assert await judge(engine, T0 + timedelta(seconds=5)) == {}, "a status update verifies no annotation"
    assert await judge(engine, DUE) == {"unobservable": 1}


async def test_a_forged_delete_is_not_verified_by_the_delete_of_another_uid(engine: AsyncEngine) -> None:
    ours, theirs = train_b(uid="uid-ours"), train_b(uid="uid-recreated")
    (forged,) = await write(engine, [claim("DELETE", ours)])
    assert forged.record.object is not None and forged.record.object.uid == "uid-ours"
    await observe(
        engine,
        seen(theirs, "ADDED", T0 - timedelta(minutes=5)),
        seen(theirs, "DELETED", T0 + timedelta(seconds=1)),  # same namespace, kind and name
        seen(train_b(uid="uid-ours"), "MODIFIED", T0 + timedelta(seconds=2)),  # ours lives on
    )

    assert await judge(engine, T0 + timedelta(seconds=5)) == {}
    assert await judge(engine, DUE) == {"unmatched": 1}
    found = await verdict(engine, forged.seq)
    assert found is not None and "did not see MPIJob team-a/train-b (uid uid-ours) deleted" in (
        found.detail or ""
    )


async def test_a_delete_and_a_create_are_verified_by_their_uid(engine: AsyncEngine) -> None:
    job = train_b(uid="uid-gone")
    created = trainjob("bert", "team-b", uid="uid-new")
    created["metadata"]["creationTimestamp"] = stamp(T0)
    stored = await write(engine, [claim("DELETE", job), claim("CREATE", created)])
    await observe(
        engine,
        seen(job, "ADDED", T0 - timedelta(hours=1)),
        seen(job, "DELETED", T0 + timedelta(seconds=1)),
        normalize_job(created, "ADDED", T0 + timedelta(seconds=1)),
    )

    assert await judge(engine, T0 + timedelta(seconds=2)) == {"verified": 2}
    assert [await status(engine, s.seq) for s in stored] == ["verified", "verified"]


async def test_a_create_long_after_the_object_was_created_is_contradicted(engine: AsyncEngine) -> None:
    job = train_b()  # created an hour before the claim
    (forged,) = await write(engine, [claim("CREATE", job)])
    await observe(engine, seen(job, "ADDED", T0 - timedelta(hours=1)), seen(job, "MODIFIED", T0))

    assert await judge(engine, DUE) == {"contradicted": 1}
    found = await verdict(engine, forged.seq)
    assert found is not None and "created at 2026-11-23T08:00:00+00:00, not within 120s" in (
        found.detail or ""
    )


async def test_one_watched_change_bears_out_one_record(engine: AsyncEngine) -> None:
    before = train_b(4)
    after = changed(before, workers=64)
    scale = claim("UPDATE", after, before, caller="mtls")
    stored = await write(
        engine,
        [scale, scale.model_copy(update={"id": "admission/replayed", "request_uid": "replayed"})],
    )
    await observe(engine, seen(before, "ADDED", T0 - timedelta(hours=1)), seen(after, "MODIFIED", T0))

    assert await judge(engine, T0 + timedelta(seconds=1)) == {"verified": 1}
    assert await judge(engine, DUE) == {"unmatched": 1}
    assert [await status(engine, s.seq) for s in stored] == ["verified", "unmatched"]
    second = await verdict(engine, stored[1].seq)
    assert second is not None and f"bore out record seq {stored[0].seq} already" in (second.detail or "")


async def claims_of(engine: AsyncEngine) -> list[tuple[int, str | None, str]]:
    async with engine.connect() as conn:
        rows = await conn.exec_driver_sql(
            "SELECT audit_seq, claim, status FROM admission_corroborations ORDER BY audit_seq"
        )
        return [tuple(r) for r in rows]  # type: ignore[misc]


async def test_a_forged_update_posted_before_the_change_does_not_take_it(engine: AsyncEngine) -> None:
    """The forger names the change someone is about to make; it is chained, the change is seen and
    the forgery verified before the genuine record (both without the API server's certificate)
    arrives. The genuine one is not unmatched, the forgery not verified: both are disputed."""
    before = train_b(4)
    after = changed(before, workers=64)
    (forged,) = await write(engine, [claim("UPDATE", after, before).model_copy(update={"id": "forged"})])
    await observe(engine, seen(before, "ADDED", T0 - timedelta(hours=1)), seen(after, "MODIFIED", T0))
    assert await judge(engine, T0 + timedelta(seconds=1)) == {"verified": 1}, "nothing contests it yet"

    (genuine,) = await write(engine, [claim("UPDATE", after, before)])
    async with engine.begin() as conn:
        decided = await corroboration.decide(conn, DUE, WINDOW)

    assert [(d.seq, d.status, d.rival, d.revised) for d in decided] == [
        (forged.seq, "disputed", genuine.seq, True),
        (genuine.seq, "disputed", forged.seq, False),
    ]
    assert [await status(engine, s.seq) for s in (forged, genuine)] == ["disputed", "disputed"]
    shown = await verdict(engine, genuine.seq)
    assert shown is not None and f"record seq {forged.seq} claims the same change" in (shown.detail or "")
    claimed = await verdict(engine, forged.seq)
    assert claimed is not None and f"record seq {genuine.seq} claims the same change" in (
        claimed.detail or ""
    )
    assert [c for _, c, _ in await claims_of(engine)] == [
        f"{UID}/{after['metadata']['resourceVersion']}",
        None,
    ]

    (third,) = await write(engine, [claim("UPDATE", after, before).model_copy(update={"id": "third"})])
    async with engine.begin() as conn:
        later = await corroboration.decide(conn, DUE, WINDOW)
    assert [(d.seq, d.status, d.rival) for d in later] == [(third.seq, "disputed", forged.seq)]


async def test_a_forged_delete_posted_before_is_displaced_by_the_api_servers_record(
    engine: AsyncEngine,
) -> None:
    job = train_b(uid="uid-del")
    (forged,) = await write(engine, [claim("DELETE", job).model_copy(update={"id": "forged"})])
    await observe(engine, seen(job, "ADDED", T0 - timedelta(hours=1)), seen(job, "DELETED", T0))
    assert await judge(engine, T0 + timedelta(seconds=1)) == {"verified": 1}

    (genuine,) = await write(engine, [claim("DELETE", job, caller="mtls")])
    async with engine.begin() as conn:
        decided = await corroboration.decide(conn, DUE, WINDOW)

    assert [(d.seq, d.status, d.caller, d.rival, d.revised) for d in decided] == [
        (forged.seq, "unmatched", "unverified", genuine.seq, True),
        (genuine.seq, "verified", "mtls", forged.seq, False),
    ]
    assert [await status(engine, s.seq) for s in (forged, genuine)] == ["unmatched", "verified"]
    assert await claims_of(engine) == [  # verdicts are append-only: the forged one is read through its rival
        (forged.seq, "uid-del/delete", "verified"),
        (genuine.seq, None, "verified"),
    ]
    (third,) = await write(engine, [claim("DELETE", job).model_copy(update={"id": "third"})])
    async with engine.begin() as conn:
        later = await corroboration.decide(conn, DUE, WINDOW)
    assert [(d.seq, d.status, d.rival) for d in later] == [(third.seq, "unmatched", genuine.seq)]
    lost = await verdict(engine, forged.seq)
    assert lost is not None and f"bore out record seq {genuine.seq}, from the API server's certificate" in (
        lost.detail or ""
    )


async def test_a_record_from_the_api_servers_certificate_takes_the_change_first(engine: AsyncEngine) -> None:
    job = train_b(uid="uid-del")
    forged = claim("DELETE", job)  # chained first, claiming someone else's delete
    real = claim("DELETE", job, caller="mtls").model_copy(
        update={"id": "admission/real", "request_uid": "real"}
    )
    stored = await write(engine, [forged, real])
    await observe(engine, seen(job, "ADDED", T0 - timedelta(hours=1)), seen(job, "DELETED", T0))

    async with engine.begin() as conn:
        decided = await corroboration.decide(conn, DUE, WINDOW)
    assert [(d.seq, d.status, d.caller, d.rival) for d in decided] == [
        (stored[1].seq, "verified", "mtls", None),
        (stored[0].seq, "unmatched", "unverified", stored[1].seq),
    ]


async def test_records_with_any_caller_are_judged(engine: AsyncEngine) -> None:
    job = train_b(uid="uid-untouched")
    stored = await write(
        engine,
        [
            claim("DELETE", job, caller="mtls"),
            claim("DELETE", job).model_copy(update={"id": "admission/no-caller", "caller": None}),
        ],
    )
    assert await judge(engine, DUE) == {"unmatched": 2}
    assert [await status(engine, s.seq) for s in stored] == ["unmatched", "unmatched"]
    async with engine.connect() as conn:
        assert await corroboration.pending(conn) == 0


async def test_replicas_judging_at_once_agree_on_one_verdict_and_one_claim(engine: AsyncEngine) -> None:
    before = train_b(4)
    after = changed(before, workers=64)
    scale = claim("UPDATE", after, before)
    copies = [scale.model_copy(update={"id": f"admission/{n}"}) for n in range(4)]
    await write(engine, copies)
    await observe(engine, seen(before, "ADDED", T0 - timedelta(hours=1)), seen(after, "MODIFIED", T0))

    outcomes = await asyncio.gather(*(judge(engine, DUE) for _ in range(4)))
    assert sum(o.get("disputed", 0) for o in outcomes) == 4, (
        "four copies without the certificate: all disputed"
    )
    assert sum(o.get("verified", 0) + o.get("unmatched", 0) for o in outcomes) == 0
    assert len([c for _, c, _ in await claims_of(engine) if c is not None]) == 1, "one claim"


async def test_old_versions_go_but_the_newest_of_a_live_job_stays(engine: AsyncEngine) -> None:
    """A job untouched for days is still compared with its last version when it is scaled."""
    created = train_b(4)
    before = changed(created, status=True)
    after = changed(before, workers=64)
    gone = train_b(uid="uid-gone")
    await observe(
        engine,
        seen(created, "ADDED", T0 - timedelta(days=3)),
        seen(before, "MODIFIED", T0 - timedelta(days=2)),
        seen(gone, "ADDED", T0 - timedelta(days=3)),
        seen(gone, "DELETED", T0 - timedelta(days=2)),
    )
    await judge(engine, T0)
    async with engine.connect() as conn:
        kept = (await conn.exec_driver_sql("SELECT uid, change FROM watch_changes")).all()
    assert kept == [(UID, "MODIFIED")]

    (real,) = await write(engine, [claim("UPDATE", after, before)])
    await observe(engine, seen(after, "MODIFIED", T0))
    assert await judge(engine, T0 + timedelta(seconds=1)) == {"verified": 1}
    assert await status(engine, real.seq) == "verified"


def cef_pairs(line: str) -> dict[str, str]:
    return parse_cef(line)[1]


async def test_the_api_shows_each_records_standing_and_the_loop_counts_by_caller(engine: AsyncEngine) -> None:
    now = datetime.now(T0.tzinfo)

    def at(record: AuditRecord, when: datetime, n: int) -> AuditRecord:
        return record.model_copy(update={"at": when, "id": f"test/{n}"})

    before = train_b(4)
    after = changed(before, workers=64)
    await write(
        engine,
        [
            at(claim("DELETE", train_b(uid="uid-x")), now - timedelta(minutes=5), 1),  # never seen
            at(claim("UPDATE", after, before), now, 2),  # seen below
            at(claim("CREATE", trainjob("late", "team-a")), now, 3),  # not yet
            at(claim("DELETE", train_b(uid="uid-y"), caller="mtls"), now - timedelta(minutes=5), 4),
            audit_record(5, verb="failed", at=now),  # lifecycle: not an admission claim
        ],
        now,
    )
    await observe(engine, seen(before, "ADDED", now - timedelta(hours=1)), seen(after, "MODIFIED", now))
    metrics = PipelineMetrics()
    counted = CorroborationMetrics.on(metrics.registry)
    stop = asyncio.Event()
    settings = AuditSettings(corroboration_window_s=WINDOW.total_seconds(), corroboration_interval_s=0.05)
    loop = asyncio.create_task(
        run_corroboration(engine, settings, stop, lambda: datetime.now(T0.tzinfo), counted)
    )
    try:
        for _ in range(200):
            if counted.sample("mpijc_admission_corroborations_total", status="verified", caller="unverified"):
                break
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await loop

    app = create_app(engine, metrics, StaticAccess(USERS))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        page = (await api.get("/api/v1/audit", headers=bearer("token-admin"))).json()
        exported = (await api.get("/api/v1/audit/export?format=cef", headers=bearer("token-admin"))).text

    standing = {item["record"]["id"]: item["corroboration"] for item in page["items"]}
    assert standing == {
        "test/1": "unmatched",
        "test/2": "verified",
        "test/3": "pending",
        "test/4": "unmatched",  # from the API server's certificate, judged all the same
        "test/5": None,
    }
    in_cef = {
        pairs["externalId"]: (pairs.get("flexString2"), pairs.get("cat"))
        for pairs in map(cef_pairs, exported.splitlines())
    }
    assert in_cef == {
        "test/1": ("unverified", "unmatched"),
        "test/2": ("unverified", "verified"),
        "test/3": ("unverified", "pending"),
        "test/4": ("mtls", "unmatched"),
        "test/5": (None, None),
    }
    details = {item["record"]["id"]: item["corroboration_detail"] for item in page["items"]}
    assert "worker.replicas 4 → 64" in details["test/2"] and details["test/3"] is None
    sample = counted.sample
    assert sample("mpijc_admission_corroborations_total", status="unmatched", caller="unverified") == 1
    assert sample("mpijc_admission_corroborations_total", status="unmatched", caller="mtls") == 1
    assert sample("mpijc_admission_corroborations_total", status="verified", caller="unverified") == 1
    assert sample("mpijc_admission_uncorroborated") == 1


async def test_the_migration_marks_records_it_cannot_judge_any_more(
    database_url: str, engine: AsyncEngine
) -> None:
    await engine.dispose()
    await asyncio.to_thread(migrate.downgrade, database_url, "0009")
    mtls, unverified = claim("DELETE", train_b(uid="u1"), caller="mtls"), claim("DELETE", train_b(uid="u2"))
    stored = await write(engine, [mtls, unverified, audit_record(3, verb="failed")])
    await engine.dispose()
    await migrate.upgrade_async(database_url)

    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT audit_seq, status FROM admission_corroborations ORDER BY audit_seq")
    finally:
        await conn.close()
    assert [tuple(r) for r in rows] == [(stored[0].seq, "unjudged")], "the unverified one is still judged"


async def test_a_round_looks_only_after_what_is_settled(engine: AsyncEngine) -> None:
    job = train_b(uid="uid-s")
    old = await write(
        engine, [claim("DELETE", job), claim("DELETE", job).model_copy(update={"id": "admission/b"})]
    )
    async with engine.begin() as conn:
        assert await corroboration.settled(conn) == 0, "nothing judged yet"
        await corroboration.decide(conn, DUE, WINDOW)
        assert await corroboration.settled(conn) == old[-1].seq
    later = await write(
        engine, [claim("DELETE", job).model_copy(update={"id": "admission/c", "at": DUE})], DUE
    )
    async with engine.begin() as conn:
        assert await corroboration.settled(conn, old[-1].seq) == old[-1].seq, "the new one waits"
        assert await corroboration.pending(conn, old[-1].seq) == 1
        await corroboration.decide(conn, DUE + WINDOW * 2, WINDOW, after=old[-1].seq)
        assert await corroboration.settled(conn, old[-1].seq) == later[-1].seq


async def test_a_record_that_does_not_parse_is_unmatched_not_a_stuck_loop(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.exec_driver_sql(
            "INSERT INTO audit_records (seq, event_id, recorded_at, record, prev_hash, hash, at, source, verb) "
            "VALUES (1, 'odd', now(), '{\"verb\": \"scale\"}', repeat('0', 64), repeat('0', 64), now(), "
            "'admission', 'update')"
        )
    assert await judge(engine, datetime.now(T0.tzinfo)) == {"unmatched": 1}
    found = await verdict(engine, 1)
    assert found is not None and "cannot be read" in (found.detail or "")
