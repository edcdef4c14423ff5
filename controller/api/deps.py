"""What routes get from the application: the database engine and the metrics registry."""

from __future__ import annotations

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.metrics import PipelineMetrics


def engine_of(request: Request) -> AsyncEngine:
    engine: AsyncEngine = request.app.state.engine
    return engine


def metrics_of(request: Request) -> PipelineMetrics:
    metrics: PipelineMetrics = request.app.state.metrics
    return metrics
