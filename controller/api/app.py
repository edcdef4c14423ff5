"""FastAPI application factory; routes read through :mod:`controller.queries` only."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller import queries
from controller.history import ping
from controller.metrics import PipelineMetrics


def _run(run: Any) -> dict[str, Any]:
    return {
        c: getattr(run, c)
        for c in (
            "uid",
            "kind",
            "namespace",
            "name",
            "attempt",
            "previous_uid",
            "phase",
            "created_at",
            "started_at",
            "finished_at",
            "deleted_at",
            "spec",
            "labels",
            "conditions",
        )
    }


def create_app(engine: AsyncEngine, metrics: PipelineMetrics) -> FastAPI:
    """The API over one database engine and one metrics registry."""
    app = FastAPI(title="mpijob-controller", version="0.1.0")

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz() -> dict[str, str]:
        try:
            async with engine.connect() as conn:
                await ping(conn)
        except Exception as exc:
            raise HTTPException(503, f"database unavailable: {type(exc).__name__}") from exc
        return {"status": "ready"}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/api/v1/runs")
    async def list_runs(
        namespace: str | None = None,
        name: str | None = None,
        kind: str | None = None,
        phase: str | None = None,
        created_after: datetime | None = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        where = queries.RunFilter(
            namespace=namespace, name=name, kind=kind, phase=phase, created_after=created_after
        )
        async with engine.connect() as conn:
            runs = await queries.list_runs(conn, where, limit)
        return {"items": [_run(r) for r in runs]}

    @app.get("/api/v1/runs/{uid}")
    async def get_run(uid: str) -> dict[str, Any]:
        async with engine.connect() as conn:
            run = await queries.get_run(conn, uid)
            if run is None:
                raise HTTPException(404, f"no run with uid {uid!r}")
            pods = await queries.run_pods(conn, uid)
        return {
            **_run(run),
            "pods": [
                {
                    c: getattr(p, c)
                    for c in (
                        "uid",
                        "name",
                        "role",
                        "index",
                        "phase",
                        "node",
                        "reason",
                        "restart_count",
                        "containers",
                    )
                }
                for p in pods
            ],
        }

    @app.get("/api/v1/runs/{uid}/timeline")
    async def timeline(uid: str) -> dict[str, Any]:
        async with engine.connect() as conn:
            if await queries.get_run(conn, uid) is None:
                raise HTTPException(404, f"no run with uid {uid!r}")
            entries = await queries.run_timeline(conn, uid)
        return {
            "items": [
                {"at": e.at, "source": e.source, "summary": e.summary, "detail": e.detail} for e in entries
            ]
        }

    return app
