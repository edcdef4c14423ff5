"""FastAPI application factory: one router per concern, included here and nowhere else."""

from __future__ import annotations

from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api import health, runs
from controller.metrics import PipelineMetrics


def create_app(engine: AsyncEngine, metrics: PipelineMetrics) -> FastAPI:
    """The API over one database engine and one metrics registry."""
    app = FastAPI(title="mpijob-controller", version="0.1.0")
    app.state.engine = engine
    app.state.metrics = metrics
    app.include_router(health.router)
    app.include_router(runs.router)
    return app
