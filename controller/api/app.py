"""FastAPI application factory: one router per concern, included here and nowhere else."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api import audit, compare, events, health, jobs, logs, notifications, pages, problems, runs
from controller.api.access import AccessReviewer, StaticAccess
from controller.api.bodylimit import BodyLimit
from controller.api.limits import DEFAULT_LIMITS, DEFAULT_QUOTAS, ApiLimits, SubscriptionQuotas
from controller.api.metrics_collectors import ScrapeCollector, StoreCollector
from controller.api.ratelimit import ClientLimiter
from controller.api.streaming import DEFAULT_STREAMS, StreamGate, StreamLimits
from controller.contract.settings import NotifySettings
from controller.metrics import Heartbeat, PipelineMetrics


def create_app(
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    reviewer: AccessReviewer | None = None,
    *,
    notify: NotifySettings | None = None,
    webhooks_router: APIRouter | None = None,
    collectors: Sequence[ScrapeCollector] = (),
    metrics_ttl_s: float = 10.0,
    limits: ApiLimits = DEFAULT_LIMITS,
    quotas: SubscriptionQuotas = DEFAULT_QUOTAS,
    streams: StreamLimits = DEFAULT_STREAMS,
    run_logs: logs.RunLogs | None = None,
    search: logs.SearchLimits = logs.DEFAULT_SEARCH,
) -> FastAPI:
    """The API over one database engine, one metrics registry and one access reviewer.

    ``reviewer`` None admits nobody (no tokens): pass :func:`controller.api.access.build_reviewer`'s
    answer. The registry gains the store's figures (jobs by phase, run durations, findings),
    computed from the database when ``/metrics`` is scraped at most every ``metrics_ttl_s``;
    ``collectors`` adds others (:class:`~controller.api.metrics_collectors.JetStreamCollector`),
    already registered on ``metrics.registry``. Every router is mounted here; the notifications
    router (:mod:`~controller.api.notifications`) follows ``notify`` (its SSRF allowlist, public
    URL) and ``quotas``, or is given whole as ``webhooks_router`` by a test that needs its own
    resolver or clock.

    ``limits`` bound what a request and a client may cost: a body is read only once its
    caller is authenticated, and only within its size, deadline and item budget
    (:class:`~controller.api.bodylimit.BodyLimit`, before any route runs), and every
    authentication goes through per-client rate limits (429). ``run_logs`` is where the runs'
    followed logs are read (without it, ``…/logs`` answers 503), under ``search``'s budget and on
    its threads.

    The pages under ``/ui/`` (:mod:`~controller.api.pages`) read what these routes answer, for
    the same callers. Served to OpenShift's OAuth proxy, the app is wrapped in
    :class:`~controller.api.auth.ForwardedTokens` (:func:`controller.api.server.forwarded_config`).
    """
    app = FastAPI(
        title="mpijob-controller",
        version="0.1.0",
        summary="History, comparison and findings of Kubeflow training jobs (MPIJob, PyTorchJob, TFJob, "
        "XGBoostJob, PaddleJob, JAXJob, TrainJob).",
    )
    app.state.engine = engine
    app.state.metrics = metrics
    app.state.reviewer = reviewer if reviewer is not None else StaticAccess({})
    app.state.limiter = ClientLimiter(limits)
    app.state.review_limit = limits.reviews_per_request
    app.state.streams = StreamGate(streams, engine)
    app.state.logs = run_logs
    app.state.log_search = logs.Searching(search)
    app.state.collectors = (StoreCollector(engine, metrics.registry, metrics_ttl_s), *collectors)
    subscriptions = webhooks_router or notifications.build_router(notify or NotifySettings(), quotas=quotas)
    routers = (health.router, runs.router, jobs.router, events.router, logs.router, compare.router)
    for router in (*routers, subscriptions, audit.router, pages.router):
        app.include_router(router)
    app.mount(pages.STATIC, StaticFiles(directory=pages.STATIC_DIR), name="ui-static")
    problems.install(app)
    app.add_middleware(BodyLimit, limits=limits, gate=pages.body_gate)
    return app


def metrics_app(
    api: FastAPI, api_loop: asyncio.AbstractEventLoop | None = None, heartbeat: Heartbeat | None = None
) -> FastAPI:
    """``/metrics`` (and ``/healthz``, ``/readyz``) of ``api``'s process, on an app of its own for
    the metrics port: the figures name every namespace with jobs, so they stay off the public
    port. Served on a loop of its own (a thread), it is given ``api_loop``, where ``api``'s
    database engine lives: ``/metrics`` and ``/readyz`` query the store there (so they wait
    while that loop is busy: busy, not ready), ``/healthz`` answers from its own, 503 once
    ``heartbeat`` (stamped by ``api_loop``) is stale: that loop is stuck, not busy."""
    app = FastAPI(title="mpijob-controller metrics", openapi_url=None, docs_url=None, redoc_url=None)
    app.state.engine, app.state.metrics = api.state.engine, api.state.metrics
    app.state.api_loop = api_loop
    app.state.heartbeat = heartbeat
    app.state.collectors = api.state.collectors
    app.include_router(health.metrics_router)
    app.include_router(health.router)
    problems.install(app)
    return app
