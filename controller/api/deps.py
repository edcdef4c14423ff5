"""What routes get from the application: the database engine, metrics registry and access reviewer.

:func:`controller.api.app.create_app` puts them on ``app.state``; routes reach them through
these functions only, so the state's layout is known in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import AccessReviewer
from controller.api.metrics_collectors import ScrapeCollector
from controller.api.ratelimit import ClientLimiter
from controller.metrics import PipelineMetrics


def engine_of(request: Request) -> AsyncEngine:
    """The history store's engine."""
    engine: AsyncEngine = request.app.state.engine
    return engine


def metrics_of(request: Request) -> PipelineMetrics:
    """The process's metrics (served on ``/metrics``)."""
    metrics: PipelineMetrics = request.app.state.metrics
    return metrics


def reviewer_of(request: Request) -> AccessReviewer:
    """Who answers "whose token is this", "may they read (update jobs in) that namespace"."""
    reviewer: AccessReviewer = request.app.state.reviewer
    return reviewer


def review_limit_of(request: Request) -> int:
    """Access decisions one request may ask for beyond the reviewer's cache."""
    limit: int = request.app.state.review_limit
    return limit


def collectors_of(request: Request) -> Sequence[ScrapeCollector]:
    """Collectors to refresh before ``/metrics`` renders."""
    collectors: Sequence[ScrapeCollector] = request.app.state.collectors
    return collectors


def limiter_of(request: Request) -> ClientLimiter:
    """The per-client rate limits every authentication goes through."""
    limiter: ClientLimiter = request.app.state.limiter
    return limiter
