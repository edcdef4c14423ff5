"""Server-Sent Events, as every stream of the API serves them (a run's or a job's events, a log
follow): the gate that counts open streams, their limits, heartbeats, and re-checks of the caller.

:class:`StreamGate` counts open streams in all, per caller and per namespace, and holds the runs'
shared feeds (:class:`~controller.api.feeds.RunFeeds`): over ``events_max_streams_per_client``
for one caller, or ``events_max_streams_per_namespace`` for the namespace streamed, 429; over
``events_max_streams`` for the process, 503; all with ``Retry-After``. The namespace cap is below
the process's, so one namespace's callers leave streams to the others.

:func:`stream_response` serves a generator of frames through that gate: ``None`` (a poll with no
news) becomes a comment line every ``heartbeat_s``, keeping an idle stream open through proxies,
and every ``recheck_s`` (``review_ttl_s``) the caller's access is decided again
(:func:`~controller.api.auth.still_allowed`); on a refusal a last event, ``denied``, says why and
the stream ends. A reviewer that cannot answer leaves the stream open and is asked again next time.
:func:`event` writes one event.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.background import BackgroundTask

from controller.api.auth import Principal, still_allowed
from controller.api.feeds import RunFeeds
from controller.contract.settings import ApiSettings

__all__ = [
    "DEFAULT_STREAMS",
    "MEDIA_TYPE",
    "Recheck",
    "StreamGate",
    "StreamLimits",
    "event",
    "gate_of",
    "stream_response",
    "with_heartbeats",
]

MEDIA_TYPE = "text/event-stream"
_KEEPALIVE = ": keepalive\n\n"


@dataclasses.dataclass(frozen=True)
class StreamLimits:
    """How often streams look for news, keep quiet connections open, and how many may be open."""

    poll_s: float = 1.0
    heartbeat_s: float = 15.0
    max_streams: int = 100
    max_per_client: int = 10
    max_per_namespace: int = 25
    finding_grace_s: float = 30.0
    retry_ms: int = 2000
    recheck_s: float = 30.0
    """How often an open stream asks again whether its caller may still read it."""

    @classmethod
    def from_settings(cls, api: ApiSettings) -> StreamLimits:
        return cls(
            poll_s=api.events_poll_s,
            heartbeat_s=api.events_heartbeat_s,
            max_streams=api.events_max_streams,
            max_per_client=api.events_max_streams_per_client,
            max_per_namespace=api.events_max_streams_per_namespace,
            finding_grace_s=api.events_finding_grace_s,
            recheck_s=api.review_ttl_s,
        )


class StreamGate:
    """Open streams, counted in all, per caller and per namespace (:meth:`open` refuses one too
    many), and the runs' shared feeds they read."""

    def __init__(self, limits: StreamLimits, engine: AsyncEngine) -> None:
        self.limits = limits
        self.feeds = RunFeeds(engine, limits.poll_s)
        self.open_streams = 0
        self._per_client: Counter[str] = Counter()
        self._per_namespace: Counter[str] = Counter()

    def open(self, principal: Principal, namespace: str) -> Callable[[], None]:
        """Count a new stream of ``principal`` in ``namespace``; the answer releases it (once,
        however often called)."""
        mine = self._per_client[principal.username]
        if mine >= self.limits.max_per_client:
            raise HTTPException(
                429,
                f"{principal.username} has {mine} event streams open, the most one caller may",
                headers={"Retry-After": "10"},
            )
        theirs = self._per_namespace[namespace]
        if theirs >= self.limits.max_per_namespace:
            raise HTTPException(
                429,
                f"namespace {namespace!r} has {theirs} event streams open, the most one namespace may "
                "(api.events_max_streams_per_namespace)",
                headers={"Retry-After": "10"},
            )
        if self.open_streams >= self.limits.max_streams:
            raise HTTPException(
                503,
                f"this API process serves its most event streams ({self.open_streams}); retry",
                headers={"Retry-After": "5"},
            )
        self.open_streams += 1
        self._per_client[principal.username] += 1
        self._per_namespace[namespace] += 1
        released = False

        def release() -> None:
            nonlocal released
            if released:
                return
            released = True
            self.open_streams -= 1
            for counts, key in ((self._per_client, principal.username), (self._per_namespace, namespace)):
                counts[key] -= 1
                if counts[key] <= 0:
                    del counts[key]

        return release


DEFAULT_STREAMS = StreamLimits.from_settings(ApiSettings())


def gate_of(request: Request) -> StreamGate:
    gate: StreamGate = request.app.state.streams
    return gate


Recheck = Callable[[], Awaitable[str | None]]
"""Asked while a stream is open: ``None`` while its caller may still read it, else why not."""


def stream_response(
    request: Request,
    principal: Principal,
    namespace: str,
    frames: AsyncGenerator[str | None, None],
    *,
    logs: bool = False,
) -> StreamingResponse:
    """``frames`` of ``namespace`` as Server-Sent Events for ``principal``: counted by the gate
    (429/503 beyond its caps), with heartbeats, and ended by a ``denied`` event once a re-check
    (every ``recheck_s``) finds the caller may no longer read the namespace (``logs``: nor its
    container logs) or their token is no longer accepted."""
    gate = gate_of(request)
    release = gate.open(principal, namespace)

    async def recheck() -> str | None:
        return await still_allowed(request, principal, namespace, logs=logs)

    async def counted() -> AsyncIterator[str]:
        try:
            async for frame in with_heartbeats(frames, gate.limits, recheck):
                yield frame
        finally:
            release()

    return StreamingResponse(
        counted(),
        media_type=MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        background=BackgroundTask(release),
    )


async def with_heartbeats(
    frames: AsyncGenerator[str | None, None], limits: StreamLimits, recheck: Recheck | None = None
) -> AsyncIterator[str]:
    """``frames`` with ``None`` (a poll with no news, at least every ``poll_s``) turned into a
    comment line every ``heartbeat_s``; with ``recheck``, asked every ``recheck_s``, a refusal
    ends them with a ``denied`` event that says why."""
    yield f"retry: {limits.retry_ms}\n\n"
    last = checked = time.monotonic()
    async with contextlib.aclosing(frames):
        async for frame in frames:
            now = time.monotonic()
            if recheck is not None and now - checked >= limits.recheck_s:
                checked = now
                denied = await recheck()
                if denied is not None:
                    yield event(None, "denied", {"reason": denied})
                    return
            if frame is not None:
                yield frame
                last = now
            elif now - last >= limits.heartbeat_s:
                yield _KEEPALIVE
                last = now


def event(event_id: str | None, kind: str, data: dict[str, Any]) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
