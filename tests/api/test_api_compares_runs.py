"""Detail, timeline, comparison and trends tell the story the history store holds."""

from __future__ import annotations

from datetime import timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.api_fixtures import ADMIN, T0, fire, insert_runs, job_story, run_row, store


@pytest.fixture
async def pair(engine: AsyncEngine) -> tuple[str, str]:
    """Attempt 1 of `train` OOM-killed with 16Gi and 2 workers; attempt 2 succeeded with 32Gi and 3."""
    failed, story = job_story("train", workers=2, memory="16Gi", outcome="Failed", oom_worker=1)
    await store(engine, story)
    await fire(engine, failed, "team-a", "train", "oom", "Worker 1 failed: out of memory (limit 16Gi).", T0)
    succeeded, story = job_story("train", workers=3, memory="32Gi", start=T0 + timedelta(hours=1), restarts=1)
    await store(engine, story)
    return failed, succeeded


async def test_compare_shows_spec_differences_durations_and_causes(
    api: httpx.AsyncClient, pair: tuple[str, str]
) -> None:
    failed, succeeded = pair
    response = await api.get("/api/v1/compare", params={"runs": f"{failed},{succeeded}"}, headers=ADMIN)
    assert response.status_code == 200, response.text
    body = response.json()

    assert body["differences"] == [
        "workers",
        "worker.replicas",
        "worker.resources.requests.memory",
        "worker.resources.limits.memory",
    ]
    fields = {f["path"]: f for f in body["spec"]}
    assert fields["worker.resources.limits.memory"]["values"] == ["16Gi", "32Gi"]
    assert fields["mpi_implementation"] == {
        "path": "mpi_implementation",
        "values": ["OpenMPI", "OpenMPI"],
        "differs": False,
    }
    assert fields["worker.image"]["differs"] is False
    assert fields['worker.resources.limits["nvidia.com/gpu"]']["values"] == ["8", "8"]

    first, second = body["runs"]
    assert (first["run"]["uid"], first["outcome"], second["outcome"]) == (failed, "Failed", "Succeeded")
    assert first["run"]["attempt"] == 1 and second["run"]["attempt"] == 2
    assert first["durations"] == {
        "queued_s": 30.0,
        "to_all_workers_running_s": 25.0,
        "running_s": 570.0,
        "total_s": 600.0,
    }
    assert second["durations"]["to_all_workers_running_s"] == 30.0  # the third worker came up 5 s later
    assert [c["rule"] for c in first["failure_causes"]] == ["oom"]
    assert "out of memory" in first["failure_causes"][0]["root_cause"]
    assert second["failure_causes"] == []

    workers = {p["index"]: p for p in first["pods"] if p["role"] == "worker"}
    assert workers[1]["phase"] == "Failed"
    assert [(t["reason"], t["exit_code"]) for t in workers[1]["terminations"]] == [("OOMKilled", 137)]
    assert workers[0]["terminations"] == []
    assert {p["restarts"] for p in second["pods"]} == {1}


async def test_compare_accepts_up_to_five_in_the_given_order(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    rows = [run_row("team-a", "pi", T0 + timedelta(minutes=i)) for i in range(6)]
    await insert_runs(engine, rows)
    uids = [r["uid"] for r in rows]
    five = await api.get("/api/v1/compare", params={"runs": ",".join(uids[4::-1])}, headers=ADMIN)
    assert five.status_code == 200
    assert [r["run"]["uid"] for r in five.json()["runs"]] == uids[4::-1]
    assert five.json()["differences"] == []
    assert five.json()["runs"][0]["durations"]["to_all_workers_running_s"] is None  # no pods recorded


@pytest.mark.parametrize(
    ("runs", "status", "says"),
    [
        ("{0}", 422, "runs"),
        ("{0},{1},{2},{3},{4},{5}", 422, "runs"),
        ("{0},{0}", 400, "each uid may appear once"),
        ("{0},missing-uid", 404, "'missing-uid'"),
        ("{0},", 422, "runs"),
        ("{0};{1}", 422, "runs"),
    ],
    ids=["one", "six", "twice", "unknown", "trailing-comma", "wrong-separator"],
)
async def test_compare_rejects_bad_run_lists(
    api: httpx.AsyncClient, engine: AsyncEngine, runs: str, status: int, says: str
) -> None:
    rows = [run_row("team-a", "pi", T0 + timedelta(minutes=i)) for i in range(6)]
    await insert_runs(engine, rows)
    response = await api.get(
        "/api/v1/compare", params={"runs": runs.format(*[r["uid"] for r in rows])}, headers=ADMIN
    )
    assert response.status_code == status
    assert says in response.text


async def test_detail_and_timeline_of_a_failed_run(api: httpx.AsyncClient, pair: tuple[str, str]) -> None:
    failed, _ = pair
    detail = (await api.get(f"/api/v1/runs/{failed}", headers=ADMIN)).json()
    assert detail["phase"] == "Failed" and detail["spec"]["workers"] == 2
    assert [c["type"] for c in detail["conditions"]] == ["Running", "Failed"]
    assert len(detail["pods"]) == 3 and [f["rule"] for f in detail["findings"]] == ["oom"]

    timeline = (await api.get(f"/api/v1/runs/{failed}/timeline", headers=ADMIN)).json()
    summaries = [e["summary"] for e in timeline["entries"]]
    assert "worker-1 container worker terminated: OOMKilled (exit 137)" in summaries
    assert summaries[-1] == "MPIJob train is Failed (MPIJobFailed)"
    worker = next(p for p in timeline["pods"] if p["role"] == "worker" and p["index"] == 1)
    assert [s["phase"] for s in worker["states"]] == ["Pending", "Running", "Failed"]
    assert worker["states"][-1]["containers"][0]["reason"] == "OOMKilled"
    assert [f["rule"] for f in timeline["findings"]] == ["oom"]

    findings = (await api.get(f"/api/v1/runs/{failed}/findings", headers=ADMIN)).json()
    assert findings["items"][0]["remediation"] == ["Increase worker memory."]


@pytest.mark.parametrize("path", ["", "/timeline", "/findings"])
async def test_unknown_run_is_404(api: httpx.AsyncClient, path: str) -> None:
    response = await api.get(f"/api/v1/runs/no-such-run{path}", headers=ADMIN)
    assert response.status_code == 404 and "no-such-run" in response.json()["detail"]


async def test_trends_of_one_job(api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    phases = ["Succeeded", "Failed", "Succeeded", "Failed", "Running", "Succeeded"]
    rows = [
        run_row("team-a", "nightly", T0 + timedelta(days=i), phase=p, attempt=i + 1)
        for i, p in enumerate(phases)
    ]
    rows[5]["finished_at"] = rows[5]["created_at"] + timedelta(seconds=1200)
    await insert_runs(engine, [*rows, run_row("team-a", "other", T0)])

    trend = (
        await api.get("/api/v1/namespaces/team-a/jobs/nightly/trends", params={"last": 5}, headers=ADMIN)
    ).json()
    assert [p["attempt"] for p in trend["points"]] == [2, 3, 4, 5, 6]  # the last five, oldest first
    assert (trend["runs"], trend["finished"], trend["failed"]) == (5, 4, 2)
    assert trend["failure_rate"] == 0.5
    assert trend["total_duration_s"] == {"mean": 750.0, "p50": 600.0, "p95": 1200.0, "max": 1200.0}
    assert trend["points"][3]["durations"]["total_s"] is None  # still running

    empty = (await api.get("/api/v1/namespaces/team-a/jobs/never-ran/trends", headers=ADMIN)).json()
    assert (empty["runs"], empty["failure_rate"], empty["total_duration_s"]) == (0, None, None)
    assert (
        await api.get("/api/v1/namespaces/team-a/jobs/nightly/trends", params={"last": 0}, headers=ADMIN)
    ).status_code == 422
