"""Liveness, readiness and Prometheus metrics (no authentication: probes and scrapers call these).

``/metrics`` lists every namespace with jobs, so it is not on the API's public port: it is
served by :func:`controller.api.app.metrics_app` on the metrics port, which the Route and the
public Service leave out and the NetworkPolicy opens to Prometheus only. That port is served
from a thread with an event loop of its own (:func:`controller.cli.runtime.serve_api`), so the
kubelet's liveness probe (``/healthz`` there) is answered however busy the API's loop is, and
fails only once that loop made no turn for ``metrics.stuck_after_s`` (its :class:`Heartbeat`);
``/readyz`` and ``/metrics`` ask the database on the API's loop, so a loop too busy to answer
takes the pod out of the Service (busy, not dead)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fastapi import APIRouter, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from controller.api.deps import collectors_of, engine_of, metrics_of
from controller.api.metrics_collectors import refresh_all
from controller.api.params import Problem
from controller.metrics import Heartbeat
from controller.store.engine import ping

T = TypeVar("T")

router = APIRouter(tags=["health"])
metrics_router = APIRouter(tags=["metrics"])


class Status(BaseModel):
    """A probe's answer."""

    status: str


@router.get("/healthz", responses={503: {"model": Problem, "description": "The API's event loop is stuck."}})
async def healthz(request: Request) -> Status:
    """The process is up, and its API loop turns (on the metrics port: ``app.state.heartbeat``)."""
    heartbeat: Heartbeat | None = getattr(request.app.state, "heartbeat", None)
    if heartbeat is not None and not heartbeat.alive():
        raise HTTPException(503, f"the API's event loop made no turn for {heartbeat.age_s():.0f} s")
    return Status(status="ok")


@router.get("/readyz", responses={503: {"model": Problem, "description": "The database does not answer."}})
async def readyz(request: Request) -> Status:
    """The database answers."""

    async def pinged() -> None:
        async with engine_of(request).connect() as conn:
            await ping(conn)

    try:
        await on_api_loop(request, pinged)
    except Exception as exc:
        raise HTTPException(503, f"database unavailable: {type(exc).__name__}") from exc
    return Status(status="ready")


@metrics_router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text format."}},
)
async def prometheus(request: Request) -> Response:
    """Prometheus metrics of this process, plus the store's and JetStream's figures."""
    collectors = collectors_of(request)
    await on_api_loop(request, lambda: refresh_all(collectors))
    return Response(generate_latest(metrics_of(request).registry), media_type=CONTENT_TYPE_LATEST)


async def on_api_loop(request: Request, work: Callable[[], Awaitable[T]]) -> T:
    """``work()`` awaited on the loop of the API's engine: this one, unless the app answering is
    served from a loop of its own (``app.state.api_loop``, the metrics port's)."""
    home: asyncio.AbstractEventLoop | None = getattr(request.app.state, "api_loop", None)
    if home is None or home is asyncio.get_running_loop():
        return await work()

    async def run() -> T:
        return await work()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), home))
