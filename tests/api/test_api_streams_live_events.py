"""Live events as Server-Sent Events: a run's stream, a job name's stream that follows re-runs,
resumption with Last-Event-ID, the runs API's authorization, and bounded stream counts."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.streaming import StreamLimits
from controller.testing.waits import until
from tests.api_fixtures import ADMIN, T0, bearer, fire, job_story
from tests.live_events import GUARD_S, Event, Writer, of_type, read_events, serving

OOM = "Worker 1 was OOM-killed: its 16Gi limit is below what the job uses."


async def test_a_run_stream_replays_its_phases_and_ends_with_the_finding_that_explains_its_failure(
    engine: AsyncEngine,
) -> None:
    uid, story = job_story("train", outcome="Failed", oom_worker=1)
    await Writer(engine).write(story)
    await fire(engine, uid, "team-a", "train", "oom", OOM, T0 + timedelta(seconds=600))
    async with serving(engine) as api:
        events = await read_events(f"{api.url}/api/v1/runs/{uid}/events", ADMIN, of_type("end"))
    phases = [e.data["phase"] for e in events if e.event == "phase"]
    assert phases == ["Pending", "Running", "Failed"]
    [finding] = [e.data["finding"] for e in events if e.event == "finding"]
    assert (finding["rule"], finding["status"], finding["root_cause"]) == ("oom", "firing", OOM)
    end = events[-1]
    assert end.id == f"{uid}:end"
    assert end.data["phase"] == "Failed"
    assert [f["root_cause"] for f in end.data["findings"]] == [OOM]
    seqs = [e.data["seq"] for e in events[:-1]]
    assert len(set(seqs)) == len(seqs)
    assert {e.id for e in events} <= {"", *(f"{uid}:{seq}" for seq in seqs), f"{uid}:end"}


async def test_resuming_with_last_event_id_gives_every_event_once(engine: AsyncEngine) -> None:
    uid, story = job_story("train", outcome="Failed", oom_worker=1)
    writer = Writer(engine)
    await writer.write(story[:-2])  # up to Running
    url = f"/api/v1/runs/{uid}/events"
    async with serving(engine) as api:
        seen = {"running": False, "id": ""}

        def past_running(event: Event) -> bool:  # the event that ends the poll which brought Running
            carries_id, seen["id"] = event.id != seen["id"], event.id
            seen["running"] = seen["running"] or event.data.get("phase") == "Running"
            return bool(seen["running"]) and carries_id

        first = await read_events(api.url + url, ADMIN, past_running)
        await writer.write(story[-2:])  # the OOM kill and the failure, while nobody listens
        await fire(engine, uid, "team-a", "train", "oom", OOM, T0 + timedelta(seconds=600))
        rest = await read_events(api.url + url, {**ADMIN, "Last-Event-ID": first[-1].id}, of_type("end"))
        whole = await read_events(api.url + url, ADMIN, of_type("end"))
        async with httpx.AsyncClient(base_url=api.url, timeout=GUARD_S) as client:
            after_end = await client.get(url, headers={**ADMIN, "Last-Event-ID": f"{uid}:end"})
    assert [e.data.get("seq") for e in first + rest] == [e.data.get("seq") for e in whole]
    assert [e.event for e in rest][-2:] == ["finding", "end"]
    assert after_end.status_code == 204  # an EventSource stops reconnecting


async def test_the_by_name_stream_follows_a_re_run_under_the_same_name(engine: AsyncEngine) -> None:
    writer = Writer(engine)
    first, story = job_story("nightly", outcome="Failed", oom_worker=0)
    await writer.write(story)
    await fire(engine, first, "team-a", "nightly", "oom", OOM, T0 + timedelta(seconds=600))
    url = "/api/v1/namespaces/team-a/jobs/nightly/events"
    async with serving(engine) as api:
        before = await read_events(api.url + url, ADMIN, of_type("end"))
        second, rerun = job_story("nightly", start=T0 + timedelta(hours=1))
        await writer.write(rerun)
        resumed = await read_events(api.url + url, {**ADMIN, "Last-Event-ID": before[-1].id}, of_type("end"))
        latest = await read_events(api.url + url, ADMIN, of_type("end"))
    assert {e.data["uid"] for e in before} == {first}
    assert before[-1].data["phase"] == "Failed"
    assert (resumed[0].event, resumed[0].data["after"]) == ("waiting", first)
    after = resumed[1:]
    assert {(e.data["uid"], e.data["attempt"]) for e in after} == {(second, 2)}
    assert [e.data["phase"] for e in after if e.event == "phase"] == ["Pending", "Running", "Succeeded"]
    assert [e.data.get("seq") for e in latest] == [e.data.get("seq") for e in after]  # latest: the re-run


async def test_a_job_name_stream_waits_for_an_attempt_not_seen_yet(engine: AsyncEngine) -> None:
    writer = Writer(engine)
    old, story = job_story("nightly")
    await writer.write(story)
    url = "/api/v1/namespaces/team-a/jobs/nightly/events"
    async with serving(engine) as api, httpx.AsyncClient(timeout=GUARD_S) as client:
        async with client.stream("GET", api.url + url, headers=ADMIN, params={"attempt": "next"}) as response:
            lines = response.aiter_lines()
            assert await anext(lines) == "retry: 2000"
            assert await anext(lines) == ""
            waiting = [await anext(lines) for _ in range(3)]
            while (await anext(lines)) != ": keepalive":  # a heartbeat while the attempt is awaited
                pass
            new, rerun = job_story("nightly", start=T0 + timedelta(hours=1))
            await writer.write(rerun)
            data: list[dict[str, Any]] = []
            async with asyncio.timeout(GUARD_S):
                async for line in lines:
                    data += [json.loads(line.removeprefix("data: "))] if line.startswith("data: ") else []
                    if data and "findings" in data[-1]:  # the end event
                        break
        again = await read_events(api.url + url, ADMIN, of_type("end"), params={"attempt": "1"})
    assert waiting[:2] == [f"id: {old}:end", "event: waiting"]  # a reconnect waits for the same attempt
    assert {d["uid"] for d in data} == {new}  # `next`: the first attempt created after the stream opened
    assert data[-1]["phase"] == "Succeeded"
    assert {e.data["uid"] for e in again} == {old}


async def test_callers_who_may_not_read_the_run_get_what_the_runs_api_answers(engine: AsyncEngine) -> None:
    uid, story = job_story("train")
    await Writer(engine).write(story)
    async with serving(engine) as api, httpx.AsyncClient(base_url=api.url, timeout=GUARD_S) as client:
        bob = bearer("token-bob")
        run_url, job_url = f"/api/v1/runs/{uid}/events", "/api/v1/namespaces/team-a/jobs/train/events"
        assert (await client.get(f"/api/v1/runs/{uid}", headers=bob)).status_code == 404
        assert (await client.get(run_url, headers=bob)).status_code == 404
        assert (await client.get("/api/v1/namespaces/team-a/jobs/train/runs", headers=bob)).status_code == 403
        assert (await client.get(job_url, headers=bob)).status_code == 403
        assert (await client.get(run_url)).status_code == 401
        assert (await client.get(run_url, headers=bearer("stolen"))).status_code == 401
        malformed = await client.get(run_url, headers={**ADMIN, "Last-Event-ID": "nonsense"})
        elsewhere = await client.get(run_url, headers={**ADMIN, "Last-Event-ID": "other-run:4"})
    assert (malformed.status_code, elsewhere.status_code) == (400, 400)


async def test_streams_beyond_the_limits_are_refused_until_one_closes(engine: AsyncEngine) -> None:
    limits = StreamLimits(poll_s=0.05, heartbeat_s=0.2, max_streams=2, max_per_client=1)
    url = "/api/v1/namespaces/team-a/jobs/never/events"
    alice, admin = bearer("token-alice"), ADMIN
    async with serving(engine, limits) as api, httpx.AsyncClient(base_url=api.url, timeout=GUARD_S) as client:
        async with client.stream("GET", url, headers=alice) as held:
            assert held.status_code == 200
            second = await client.get(url, headers=alice)
            async with client.stream("GET", url, headers=admin) as other:
                assert other.status_code == 200
                third = await client.get(url.replace("team-a", "team-b"), headers=bearer("token-bob"))
        assert second.status_code == 429 and "Retry-After" in second.headers
        assert third.status_code == 503 and "Retry-After" in third.headers

        async def admitted() -> bool:  # closed streams give their places back once the server sees them go
            async with client.stream("GET", url, headers=alice) as again:
                return again.status_code == 200

        await until(admitted, GUARD_S, lambda: "a closed stream kept its place")
