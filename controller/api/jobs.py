"""One job name's history: its attempts and how they trend (``/api/v1/namespaces/{ns}/jobs/{name}/…``)."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import Query, Request

from controller.api import models
from controller.api.auth import require_namespace
from controller.api.deps import engine_of
from controller.api.paging import Cursor, Limit
from controller.api.params import NamePath, NamespacePath
from controller.api.routing import Caller, api_router
from controller.api.visible_runs import run_page
from controller.contract.events import JobPhase
from controller.contract.kubeflow import JobKind
from controller.store import queries

__all__ = ["MAX_TREND_RUNS", "attempts", "router", "trends"]

router = api_router("/api/v1/namespaces/{namespace}/jobs/{name}", "jobs", 400, 403)

MAX_TREND_RUNS = 200


@router.get("/runs")
async def attempts(
    namespace: NamespacePath,
    name: NamePath,
    request: Request,
    principal: Caller,
    kind: JobKind | None = None,
    phase: JobPhase | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> models.RunPage:
    """Every run (attempt) of one job name, newest first."""
    where = queries.RunFilter(namespace=namespace, name=name, kind=kind, phase=phase)
    return await run_page(request, principal, where, limit, cursor)


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile of an ascending, non-empty list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _stats(totals: list[float]) -> models.DurationStats | None:
    if not totals:
        return None
    return models.DurationStats(
        mean=sum(totals) / len(totals),
        p50=_quantile(totals, 0.5),
        p95=_quantile(totals, 0.95),
        max=totals[-1],
    )


@router.get("/trends")
async def trends(
    namespace: NamespacePath,
    name: NamePath,
    request: Request,
    principal: Caller,
    last: Annotated[int, Query(ge=1, le=MAX_TREND_RUNS, description="How many of the latest runs.")] = 20,
    kind: Annotated[
        JobKind | None,
        Query(description="Only runs of this kind (a PyTorchJob and an MPIJob may share a name)."),
    ] = None,
) -> models.Trend:
    """Duration and failure rate of the job's last ``last`` runs (of one ``kind``, if given; none
    yet: an empty trend)."""
    await require_namespace(request, principal, namespace)
    async with engine_of(request).connect() as conn:
        trend = await queries.job_trend(conn, namespace, name, last, kind)
    return models.Trend(
        namespace=namespace,
        name=name,
        runs=len(trend.points),
        finished=trend.finished,
        failed=trend.failed,
        failure_rate=trend.failure_rate,
        total_duration_s=_stats(trend.totals()),
        points=[
            models.TrendPoint(
                uid=p.run.uid,
                attempt=p.run.attempt,
                phase=p.run.phase,
                created_at=p.run.created_at,
                durations=models.Durations.model_validate(p.durations),
                memory_peak_ratio=p.memory_peak_ratio,
                gpu_util_mean_pct=p.gpu_util_mean_pct,
            )
            for p in trend.points
        ],
    )
