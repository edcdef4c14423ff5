"""Liveness, readiness and Prometheus metrics (no authentication: probes and scrapers call these).

``/metrics`` lists every namespace with jobs, so it is not on the API's public port: it is
served by :func:`controller.api.app.metrics_app` on the metrics port, which the Route and the
public Service leave out and the NetworkPolicy opens to Prometheus only."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from controller.api.deps import collectors_of, engine_of, metrics_of
from controller.api.metrics_collectors import refresh_all
from controller.api.params import Problem
from controller.store.history import ping

router = APIRouter(tags=["health"])
metrics_router = APIRouter(tags=["metrics"])


class Status(BaseModel):
    """A probe's answer."""

    status: str


@router.get("/healthz")
async def healthz() -> Status:
    """The process is up."""
    return Status(status="ok")


@router.get("/readyz", responses={503: {"model": Problem, "description": "The database does not answer."}})
async def readyz(request: Request) -> Status:
    """The database answers."""
    try:
        async with engine_of(request).connect() as conn:
            await ping(conn)
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
    await refresh_all(collectors_of(request))
    return Response(generate_latest(metrics_of(request).registry), media_type=CONTENT_TYPE_LATEST)
