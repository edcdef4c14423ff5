"""What routes get from the application: the database engine, metrics registry and access reviewer.

:func:`controller.api.app.create_app` puts them on ``app.state``; routes reach them through
these functions only, so the state's layout is known in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import AccessReviewer
from controller.api.metrics_collectors import ScrapeCollector
from controller.api.ratelimit import ClientLimiter
from controller.metrics import PipelineMetrics


def _on_state(name: str, doc: str) -> Callable[[Request], Any]:
    """The function that reads ``app.state.<name>`` of a request's application, named ``<name>_of``."""

    def of(request: Request) -> Any:
        return getattr(request.app.state, name)

    of.__name__ = of.__qualname__ = f"{name}_of"
    of.__doc__ = doc
    return of


engine_of: Callable[[Request], AsyncEngine] = _on_state("engine", "The history store's engine.")
metrics_of: Callable[[Request], PipelineMetrics] = _on_state(
    "metrics", "The process's metrics (served on ``/metrics``)."
)
reviewer_of: Callable[[Request], AccessReviewer] = _on_state(
    "reviewer", 'Who answers "whose token is this", "may they read (update jobs in) that namespace".'
)
review_limit_of: Callable[[Request], int] = _on_state(
    "review_limit", "Access decisions one request may ask for beyond the reviewer's cache."
)
collectors_of: Callable[[Request], Sequence[ScrapeCollector]] = _on_state(
    "collectors", "Collectors to refresh before ``/metrics`` renders."
)
limiter_of: Callable[[Request], ClientLimiter] = _on_state(
    "limiter", "The per-client rate limits every authentication goes through."
)
