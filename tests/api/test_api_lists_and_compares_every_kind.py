"""One history for every kind: ``/api/v1/runs?kind=`` filters across kinds, ``compare`` compares
within one kind and refuses two (400, naming them), a training-operator job's pods carry their
replica type, and ``history --kind`` prints one kind's runs with their replicas named."""

from __future__ import annotations

from datetime import timedelta

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.cli import report
from controller.testing import objects as k
from tests.api_fixtures import ADMIN, T0, insert_runs, run_row, store
from watchers.correlating import Observation


async def test_runs_filter_by_kind_across_kinds(api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    kinds = ["MPIJob", "PyTorchJob", "TFJob", "PyTorchJob", "TrainJob", "JAXJob"]
    rows = [
        run_row("team-a", f"job-{i}", T0 + timedelta(minutes=i), kind=kind) for i, kind in enumerate(kinds)
    ]
    await insert_runs(engine, rows)

    torch = await api.get("/api/v1/runs", params={"kind": "PyTorchJob"}, headers=ADMIN)
    assert torch.status_code == 200, torch.text
    assert [r["name"] for r in torch.json()["items"]] == ["job-3", "job-1"]  # newest first
    every = await api.get("/api/v1/runs", headers=ADMIN)
    assert {r["kind"] for r in every.json()["items"]} == set(kinds)
    unknown = await api.get("/api/v1/runs", params={"kind": "SparkJob"}, headers=ADMIN)
    assert unknown.status_code == 422
    assert "PyTorchJob" in unknown.text  # the answer lists the kinds there are


async def test_compare_within_a_kind_and_refuse_across_kinds(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    rows = [
        run_row("team-a", "bert", T0, kind="PyTorchJob"),
        run_row("team-a", "bert", T0 + timedelta(hours=1), kind="PyTorchJob", attempt=2),
        run_row("team-a", "pi", T0, kind="MPIJob"),
    ]
    await insert_runs(engine, rows)
    torch_a, torch_b, mpi = (r["uid"] for r in rows)

    same = await api.get("/api/v1/compare", params={"runs": f"{torch_a},{torch_b}"}, headers=ADMIN)
    assert same.status_code == 200, same.text
    across = await api.get("/api/v1/compare", params={"runs": f"{torch_a},{mpi}"}, headers=ADMIN)
    assert across.status_code == 400
    assert across.json()["detail"] == (
        f"runs: compare runs of one kind only ({torch_a} is a PyTorchJob, {mpi} is a MPIJob)"
    )


async def test_trends_of_one_name_keep_kinds_apart(api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    rows = [
        run_row("team-a", "train", T0, kind="MPIJob", phase="Failed"),
        run_row("team-a", "train", T0 + timedelta(hours=1), kind="PyTorchJob"),
        run_row("team-a", "train", T0 + timedelta(hours=2), kind="PyTorchJob", attempt=2),
    ]
    await insert_runs(engine, rows)
    url = "/api/v1/namespaces/team-a/jobs/train/trends"

    torch = await api.get(url, params={"kind": "PyTorchJob"}, headers=ADMIN)
    every = await api.get(url, headers=ADMIN)
    assert torch.status_code == every.status_code == 200, torch.text
    assert (torch.json()["runs"], torch.json()["failed"]) == (2, 0)
    assert (every.json()["runs"], every.json()["failed"]) == (3, 1)


async def test_replicas_are_named_in_the_timeline_and_the_history_report(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    job = k.training_job("PyTorchJob", "bert", replicas={"Master": 1, "Worker": 2})
    pods = [k.replica_pod(job, "Master", 0)] + [k.replica_pod(job, "Worker", i) for i in range(2)]
    oom = k.oom_killed(pods[2], "2026-11-20T10:09:00Z")
    story = [
        Observation("job", "ADDED", job, T0),
        *(Observation("pod", "ADDED", p, T0 + timedelta(seconds=2)) for p in pods),
        Observation("pod", "MODIFIED", oom, T0 + timedelta(seconds=540)),
    ]
    await store(engine, story)
    await insert_runs(engine, [run_row("team-a", "pi", T0, kind="MPIJob")])

    timeline = await api.get(f"/api/v1/runs/{job['metadata']['uid']}/timeline", headers=ADMIN)
    assert timeline.status_code == 200, timeline.text
    named = [(p["role"], p["replica"], p["index"]) for p in timeline.json()["pods"]]
    assert named == [("worker", "Master", 0), ("worker", "Worker", 0), ("worker", "Worker", 1)]
    summaries = [e["summary"] for e in timeline.json()["entries"]]
    assert any(s.startswith("Worker-1 container pytorch terminated: OOMKilled") for s in summaries), summaries

    async with engine.connect() as conn:
        printed = await report.history(conn, kind="PyTorchJob")
    assert "team-a/bert" in printed and "team-a/pi" not in printed
    assert "pod Master-0" in printed and "pod Worker-1" in printed
