"""How long the database takes to write: every INSERT/UPDATE/DELETE an engine runs, timed.

Hooked on the engine's cursor events, so every writer (history consumer batches, findings,
the audit log, webhook deliveries) is measured without each timing its own statements.
Apart from :mod:`controller.metrics` because the watchers import that one and must not
import SQLAlchemy.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.metrics import PipelineMetrics

__all__ = ["observe_db_writes"]


def observe_db_writes(engine: AsyncEngine, metrics: PipelineMetrics) -> None:
    """Time every write statement ``engine`` runs into ``metrics.db_write_seconds`` (call once per engine)."""

    @event.listens_for(engine.sync_engine, "before_cursor_execute")
    def _start(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        if context is not None:
            context.mpijc_started = time.perf_counter()

    @event.listens_for(engine.sync_engine, "after_cursor_execute")
    def _stop(conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool) -> None:
        began = getattr(context, "mpijc_started", None)
        verb = statement.lstrip()[:6].upper()
        if began is not None and verb in _WRITES:
            metrics.db_write_seconds.labels(verb).observe(time.perf_counter() - began)


_WRITES = frozenset({"INSERT", "UPDATE", "DELETE"})
