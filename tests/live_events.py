"""The API served for real (uvicorn on a loopback port) over a test's database, job stories
written step by step the way the history consumer writes them, and a Server-Sent Events reader:
for the live event streams and the ``wait`` command that follows them."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import ssl
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import httpx
import uvicorn
from httpx_sse import aconnect_sse
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import AccessReviewer, StaticAccess
from controller.api.app import create_app
from controller.api.limits import DEFAULT_LIMITS, ApiLimits
from controller.api.logs import RunLogs
from controller.api.server import server_config
from controller.api.streaming import StreamLimits
from controller.contract.settings import ApiSettings
from controller.metrics import PipelineMetrics
from controller.store.history import apply_events
from controller.testing.ports import free_port
from controller.testing.waits import until
from tests.api_fixtures import USERS
from watchers.correlating import Correlator, Observation

GUARD_S = 30.0
"""Longest any stream read here may take before the test fails (a hang guard, not a measure)."""
FAST = StreamLimits(poll_s=0.05, heartbeat_s=0.2, finding_grace_s=0.0)
"""Streams that look for news often, so tests do not sit idle."""


class Writer:
    """Observations written as the history consumer writes them, one batch per call, through one
    correlator (pods seen in a later batch still find their job)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.correlator = Correlator(30, lambda: 0.0)

    async def write(self, observations: Iterable[Observation]) -> None:
        events = [event for o in observations for event in self.correlator.observe(o)]
        async with self.engine.begin() as conn:
            await apply_events(conn, events)


@dataclasses.dataclass
class Served:
    """The API on a loopback port (HTTPS with ``tls``); :meth:`restart` stops it and serves it again
    on the same port."""

    engine: AsyncEngine
    limits: StreamLimits
    api_limits: ApiLimits = DEFAULT_LIMITS
    run_logs: RunLogs | None = None
    tls: ssl.SSLContext | None = None
    reviewer: AccessReviewer | None = None
    """Who may read what (the static ``USERS`` when not given)."""
    port: int = dataclasses.field(default_factory=free_port)
    server: uvicorn.Server | None = None
    task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}" if self.tls else f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = create_app(
            self.engine,
            PipelineMetrics(),
            self.reviewer or StaticAccess(USERS),
            streams=self.limits,
            limits=self.api_limits,
            run_logs=self.run_logs,
        )
        settings = ApiSettings(shutdown_grace_s=0.1)
        self.server = server = uvicorn.Server(server_config(app, settings, self.port, tls=self.tls))
        self.task = task = asyncio.create_task(server.serve())
        await until(lambda: server.started or task.done(), GUARD_S, lambda: "uvicorn did not start")

    async def stop(self) -> None:
        if self.server is not None and self.task is not None:
            self.server.should_exit = True
            await asyncio.wait_for(self.task, GUARD_S)
        self.server = self.task = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


@contextlib.asynccontextmanager
async def serving(
    engine: AsyncEngine,
    limits: StreamLimits = FAST,
    api_limits: ApiLimits = DEFAULT_LIMITS,
    run_logs: RunLogs | None = None,
    tls: ssl.SSLContext | None = None,
    reviewer: AccessReviewer | None = None,
) -> AsyncIterator[Served]:
    served = Served(engine, limits, api_limits, run_logs, tls, reviewer)
    await served.start()
    try:
        yield served
    finally:
        await served.stop()


@dataclasses.dataclass(frozen=True)
class Event:
    id: str
    event: str
    data: dict[str, Any]


async def read_events(
    url: str, headers: dict[str, str], last: Callable[[Event], bool], *, params: dict[str, str] | None = None
) -> list[Event]:
    """Events of the stream at ``url`` up to and including the first that is ``last``."""
    events: list[Event] = []
    async with (
        httpx.AsyncClient(timeout=GUARD_S) as client,
        aconnect_sse(client, "GET", url, headers=headers, params=params) as source,
    ):
        assert source.response.status_code == 200, source.response.status_code
        async with asyncio.timeout(GUARD_S):
            async for sse in source.aiter_sse():
                if not sse.data:  # the `retry:` hint: no event
                    continue
                events.append(Event(sse.id, sse.event, json.loads(sse.data)))
                if last(events[-1]):
                    break
    return events


def of_type(kind: str) -> Callable[[Event], bool]:
    """The first event of this type ends the read."""
    return lambda event: event.event == kind
