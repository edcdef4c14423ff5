"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from controller.api.deps import engine_of, metrics_of
from controller.history import ping

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(request: Request) -> dict[str, str]:
    try:
        async with engine_of(request).connect() as conn:
            await ping(conn)
    except Exception as exc:
        raise HTTPException(503, f"database unavailable: {type(exc).__name__}") from exc
    return {"status": "ready"}


@router.get("/metrics")
async def prometheus(request: Request) -> Response:
    return Response(generate_latest(metrics_of(request).registry), media_type=CONTENT_TYPE_LATEST)
