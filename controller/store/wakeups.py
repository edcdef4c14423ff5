"""Wake-ups across processes through PostgreSQL ``LISTEN``/``NOTIFY``.

A writer calls :func:`announce` inside the transaction that made work; PostgreSQL delivers
the notification to every listener *when that transaction commits* (never for a rollback,
and repeats within one transaction collapse into one), so a woken reader always finds the
rows. :func:`listen` keeps one pooled connection listening and calls back on every
notification, reconnecting after a lost connection. Notifications are hints, not a queue:
readers still poll now and then, since one sent while no connection listened is gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from controller.contract.clock import first_of, pause
from controller.store.engine import UNAVAILABLE

log = logging.getLogger(__name__)

_NOTIFY = text("SELECT pg_notify(:channel, '')")
RECONNECT_S = 1.0
"""Seconds between tries to listen again after the connection was lost."""


async def announce(conn: AsyncConnection, channel: str) -> None:
    """Wake ``channel``'s listeners once the current transaction commits."""
    await conn.execute(_NOTIFY, {"channel": channel})


async def listen(
    engine: AsyncEngine,
    channel: str,
    callback: Callable[[], None],
    stop: asyncio.Event,
    listening: asyncio.Event | None = None,
) -> None:
    """Call ``callback`` on each notification of ``channel`` until ``stop`` is set.

    ``callback`` also runs each time a connection starts listening, since notifications
    sent before were not heard; ``listening`` is set while one listens. A lost connection
    is replaced after :data:`RECONNECT_S`.
    """
    while not stop.is_set():
        try:
            await _listen_once(engine, channel, callback, stop, listening)
        except UNAVAILABLE as exc:
            log.warning("cannot listen on PostgreSQL channel %s: %s", channel, exc)
        if listening is not None:
            listening.clear()
        if not stop.is_set():
            await pause(stop, RECONNECT_S)


async def _listen_once(
    engine: AsyncEngine,
    channel: str,
    callback: Callable[[], None],
    stop: asyncio.Event,
    listening: asyncio.Event | None,
) -> None:
    """Listen on one connection until ``stop`` or until that connection is lost."""
    lost = asyncio.Event()

    def on_notify(*_: Any) -> None:
        callback()

    def on_lost(*_: Any) -> None:
        lost.set()

    async with engine.connect() as conn:
        driver: Any = (await conn.get_raw_connection()).driver_connection  # asyncpg's own connection
        await driver.add_listener(channel, on_notify)
        driver.add_termination_listener(on_lost)
        callback()
        if listening is not None:
            listening.set()
        try:
            await first_of(stop, lost)
        finally:
            driver.remove_termination_listener(on_lost)
            if lost.is_set():
                await conn.invalidate()
            else:
                await driver.remove_listener(channel, on_notify)
