"""FastAPI application factory: one router per concern, included here and nowhere else."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api import compare, health, jobs, runs
from controller.api.access import AccessReviewer, StaticAccess
from controller.api.metrics_collectors import ScrapeCollector, StoreCollector
from controller.metrics import PipelineMetrics


def create_app(
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    reviewer: AccessReviewer | None = None,
    *,
    routers: Sequence[APIRouter] = (),
    collectors: Sequence[ScrapeCollector] = (),
    metrics_ttl_s: float = 10.0,
) -> FastAPI:
    """The API over one database engine, one metrics registry and one access reviewer.

    ``reviewer`` None admits nobody (no tokens): pass :func:`controller.api.access.build_reviewer`'s
    answer. The registry gains the store's figures (jobs by phase, run durations, findings),
    computed from the database when ``/metrics`` is scraped at most every ``metrics_ttl_s``;
    ``collectors`` adds others (:class:`~controller.api.metrics_collectors.JetStreamCollector`),
    already registered on ``metrics.registry``. ``routers`` are mounted after the built-in ones
    (webhooks and audit, which the entry point builds from its settings); they must go through
    :mod:`controller.api.auth` like the others.
    """
    app = FastAPI(
        title="mpijob-controller",
        version="0.1.0",
        summary="History, comparison and findings of Kubeflow MPIJobs and TrainJobs.",
    )
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.reviewer = reviewer if reviewer is not None else StaticAccess({})
    app.state.collectors = (StoreCollector(engine, metrics.registry, metrics_ttl_s), *collectors)
    for router in (health.router, runs.router, jobs.router, compare.router, *routers):
        app.include_router(router)
    return app
