"""The comparison tells worker by worker what each attempt used ("attempt 1 peaked at 15.8 GiB of
16.0 GiB; attempt 2 at 17.1 GiB of 32.0 GiB"), the trend each run's peak, and the figures stay
in the history after the pods are gone."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.cli.rendering import comparison_table
from controller.store.models import PodRow
from tests.api_fixtures import ADMIN, T0, job_story, store, store_worker_usage

GIB = 2**30


async def _read(
    engine: AsyncEngine, run: str, peaks_gib: dict[int, float], limit_gib: float, final: bool
) -> None:
    """Figures for the workers of ``run`` (by index), as the watcher publishes them."""
    when = T0 + timedelta(minutes=10)

    def figures(pod: PodRow) -> dict[str, Any]:
        return {
            "since": T0,
            "until": when,
            "final": final,
            "memory_max_bytes": peaks_gib[pod.index] * GIB,
            "memory_limit_bytes": limit_gib * GIB,
            "memory_curve": ((when, peaks_gib[pod.index] * GIB),),
        }

    await store_worker_usage(engine, run, "train", when, figures)


async def test_compare_and_trends_tell_what_each_attempt_used(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    first, story = job_story("train", workers=2, memory="16Gi", outcome="Failed", oom_worker=1)
    await store(engine, story)
    second, story = job_story("train", workers=2, memory="32Gi", start=T0 + timedelta(hours=1))
    await store(engine, story)
    await _read(engine, first, {0: 9.0, 1: 15.8}, 16, final=True)
    await _read(engine, second, {0: 9.5, 1: 12.0}, 32, final=False)
    await _read(engine, second, {0: 9.1, 1: 17.1}, 32, final=False)  # a later window peaks higher

    body = (await api.get("/api/v1/compare", params={"runs": f"{first},{second}"}, headers=ADMIN)).json()
    lines = {line["slot"]: line for line in body["usage"]}
    assert lines["worker-1"]["sentence"] == (
        "worker-1: attempt 1 peaked at 15.8 GiB of 16.0 GiB; attempt 2 at 17.1 GiB of 32.0 GiB"
    )
    assert lines["worker-0"]["memory_peaks"] == [
        "9.0 GiB of 16.0 GiB",
        "9.5 GiB of 32.0 GiB",
    ]  # the peak stays
    assert "launcher" not in lines  # nothing read for it
    table = comparison_table(body).splitlines()  # as `mpijob-controller compare` prints it
    assert [" ".join(line.split()) for line in table if line.startswith("PEAK MEMORY")] == [
        "PEAK MEMORY worker-0 9.0 GiB of 16.0 GiB 9.5 GiB of 32.0 GiB",
        "PEAK MEMORY worker-1 15.8 GiB of 16.0 GiB 17.1 GiB of 32.0 GiB",
    ]

    trend = (await api.get("/api/v1/namespaces/team-a/jobs/train/trends", headers=ADMIN)).json()
    assert [p["memory_peak_ratio"] for p in trend["points"]] == [round(15.8 / 16, 4), round(17.1 / 32, 4)]

    async with engine.begin() as conn:  # the pods are gone from the history's current state …
        await conn.execute(PodRow.__table__.delete().where(PodRow.run_uid == first))
    detail = (await api.get(f"/api/v1/runs/{first}", headers=ADMIN)).json()
    assert detail["pods"] == []
    assert [u["memory_peak"] for u in detail["usage"]] == [
        "9.0 GiB of 16.0 GiB",
        "15.8 GiB of 16.0 GiB",
    ]  # … not their usage


async def test_a_run_never_read_has_no_usage(api: httpx.AsyncClient, engine: AsyncEngine) -> None:
    first, story = job_story("train")
    await store(engine, story)
    second, story = job_story("train", start=T0 + timedelta(hours=1))
    await store(engine, story)

    body = (await api.get("/api/v1/compare", params={"runs": f"{first},{second}"}, headers=ADMIN)).json()
    assert body["usage"] == []
    assert (await api.get(f"/api/v1/runs/{first}", headers=ADMIN)).json()["usage"] == []
