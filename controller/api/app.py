"""FastAPI application factory: one router per concern, included here and nowhere else."""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api import audit, compare, health, jobs, runs, webhooks
from controller.api.access import AccessReviewer, StaticAccess
from controller.api.metrics_collectors import ScrapeCollector, StoreCollector
from controller.contract.settings import NotifySettings
from controller.metrics import PipelineMetrics


def create_app(
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    reviewer: AccessReviewer | None = None,
    *,
    notify: NotifySettings | None = None,
    webhooks_router: APIRouter | None = None,
    collectors: Sequence[ScrapeCollector] = (),
    metrics_ttl_s: float = 10.0,
) -> FastAPI:
    """The API over one database engine, one metrics registry and one access reviewer.

    ``reviewer`` None admits nobody (no tokens): pass :func:`controller.api.access.build_reviewer`'s
    answer. The registry gains the store's figures (jobs by phase, run durations, findings),
    computed from the database when ``/metrics`` is scraped at most every ``metrics_ttl_s``;
    ``collectors`` adds others (:class:`~controller.api.metrics_collectors.JetStreamCollector`),
    already registered on ``metrics.registry``. Every router is mounted here; the webhooks
    router follows ``notify`` (its quotas, SSRF allowlist, public URL), or is given whole as
    ``webhooks_router`` by a test that needs its own resolver or clock.
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
    subscriptions = webhooks_router or webhooks.build_router(notify or NotifySettings())
    for router in (health.router, runs.router, jobs.router, compare.router, subscriptions, audit.router):
        app.include_router(router)
    return app
