"""The store's engine, and the one place transient database errors become retryable.

Every engine of the project comes from :func:`make_engine`: asyncpg, pre-pinged pooled
connections, JSON columns written and read by pydantic-core (in Rust: the history writes a
few JSON documents per pod event, and the standard library's encoder was a fifth of their
cost), and a ``handle_error`` hook that raises a lost connection, a server shutting
down or refusing connections, a serialization failure or a deadlock as
:class:`~controller.contract.errors.RetryableError` (chained to the original). Consumers
then redeliver instead of dead-lettering, and no other module needs to know SQLAlchemy's or
asyncpg's exception classes to decide.

The two statements every holder of a connection may need are written here once:
:func:`ping` (is the database answering) and :func:`lock_transaction` (a transaction-scoped
advisory lock that serializes writers across replicas: the audit chain's appends, the quota
checks, the corroboration decider, the notify batches).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from pydantic_core import from_json, to_json
from sqlalchemy import event, text
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from controller.contract.errors import RetryableError

__all__ = [
    "UNAVAILABLE",
    "TransientDatabaseError",
    "async_url",
    "engine_at",
    "lock_transaction",
    "make_engine",
    "ping",
]

_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01", "57P01", "57P02", "57P03", "08000", "08003", "08006"})
"""Serialization failure, deadlock, admin/crash shutdown, cannot connect now, connection failures."""


class TransientDatabaseError(RetryableError):
    """The database failed in a way that may pass: the same work is worth trying again."""


UNAVAILABLE: tuple[type[BaseException], ...] = (OSError, SQLAlchemyError, TransientDatabaseError)
"""What a loop that must outlive a database restart catches (and tries again after): the
transient errors as :func:`make_engine` raises them, and whatever else the driver raises."""


def make_engine(url: str, pool_size: int = 5) -> AsyncEngine:
    """An asyncpg engine; ``postgresql://`` URLs are switched to the asyncpg driver."""
    engine = create_async_engine(
        async_url(url),
        pool_size=pool_size,
        pool_pre_ping=True,
        json_serializer=json_text,
        json_deserializer=from_json,
    )
    event.listen(engine.sync_engine, "handle_error", _translate)
    return engine


@contextlib.asynccontextmanager
async def engine_at(url: str, pool_size: int = 5) -> AsyncIterator[AsyncEngine]:
    """:func:`make_engine` of ``url`` for the block, its pool disposed of on the way out."""
    engine = make_engine(url, pool_size)
    try:
        yield engine
    finally:
        await engine.dispose()


def json_text(value: object) -> str:
    """JSON text for a JSON/JSONB column, as the engine serializes every JSON parameter."""
    return to_json(value).decode()


def async_url(url: str) -> str:
    """``postgresql://…`` → ``postgresql+asyncpg://…`` (other drivers are replaced too)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.startswith("postgres"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return f"postgresql+asyncpg://{rest}"


def _translate(context: ExceptionContext) -> None:
    if context.is_pre_ping:  # the pool's own liveness check handles its failures
        return
    error = context.sqlalchemy_exception
    state = getattr(context.original_exception, "sqlstate", None)
    if (
        context.is_disconnect
        or isinstance(error, OperationalError | InterfaceError)
        or state in _RETRYABLE_SQLSTATES
    ):
        raise TransientDatabaseError(str(context.original_exception)) from context.original_exception


async def ping(conn: AsyncConnection) -> None:
    """Raise if the database does not answer."""
    await conn.execute(text("SELECT 1"))


async def lock_transaction(conn: AsyncConnection, key: int) -> None:
    """Wait for the transaction-scoped advisory lock ``key`` (``pg_advisory_xact_lock``): held
    until the transaction ends, so writers holding the same key take turns."""
    await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
