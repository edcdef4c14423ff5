"""Request bodies are read only from authenticated callers, within a size, a deadline and a budget.

A pure ASGI middleware in front of routing, so before FastAPI reads and parses a body (it
does so before it solves a route's dependencies, authentication included):

1. a declared ``Content-Length`` over ``max_body_bytes`` is 413 without reading a byte;
2. a request that carries a body is authenticated (``gate``) before any of the body is read:
   a caller without an accepted token gets its 401 (429, 503) while its body is still on
   the wire, so an unauthenticated client never makes the server read or parse one;
3. the body is read as it streams in, 413 as soon as the count passes ``max_body_bytes``
   and 408 if it is not whole within ``body_timeout_s``, so a stalled upload holds its
   connection and memory that long at most;
4. a body with more JSON items (commas and opening brackets) or containers (brackets) than
   its budget is 413 before it is parsed: counting bytes costs microseconds, where parsing,
   validating and echoing a 64 KiB list of ten thousand values costs tens of milliseconds.

A body within every bound is handed on unchanged. A refusal closes the connection, so the
unread rest of a body is never waited for. The gate leaves what it learnt on the scope for
the route's own authentication (:func:`controller.api.auth.current_principal`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from controller.api.limits import ApiLimits
from controller.api.problems import PROBLEM_JSON, problem_bytes

__all__ = ["BodyLimit"]

_MAX_LENGTH_DIGITS = 18
"""More digits than this is over any limit (and ``int()`` refuses very long digit strings)."""

Gate = Callable[[Request], Awaitable[object]]
"""Raises :class:`HTTPException` for a caller who may not send a body."""


class BodyLimit:
    """Bounds, and gates, the body of every HTTP request (see the module)."""

    def __init__(self, app: ASGIApp, limits: ApiLimits, gate: Gate) -> None:
        self.app = app
        self.limits = limits
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lengths = [value for name, value in scope["headers"] if name == b"content-length"]
        if len(lengths) > 1 or (lengths and not lengths[0].isdigit()):
            await _answer(scope, send, 400, "the Content-Length header is not one non-negative integer")
            return
        if lengths and (len(lengths[0]) > _MAX_LENGTH_DIGITS or int(lengths[0]) > self.limits.max_body_bytes):
            await _answer(scope, send, 413, self._too_large())
            return
        chunked = any(name == b"transfer-encoding" for name, _ in scope["headers"])
        if not (chunked or (lengths and int(lengths[0]) > 0)):
            await self.app(scope, receive, send)  # no body: nothing to bound
            return
        try:
            await self.gate(Request(scope))
        except HTTPException as refused:
            await _answer(scope, send, refused.status_code, refused.detail, refused.headers)
            return
        try:
            async with asyncio.timeout(self.limits.body_timeout_s):
                body = await self._read(receive)
        except TimeoutError:
            await _answer(
                scope, send, 408, f"the request body did not arrive within {self.limits.body_timeout_s:g} s"
            )
            return
        if body is None:
            return  # the client left before sending its whole request: nobody to answer
        if isinstance(body, str):
            await _answer(scope, send, 413, body)
            return
        whole: Message | None = {"type": "http.request", "body": body, "more_body": False}

        async def replay() -> Message:
            nonlocal whole
            if whole is not None:
                message, whole = whole, None
                return message
            return await receive()  # after the body: http.disconnect, as the server reports it

        await self.app(scope, replay, send)

    async def _read(self, receive: Receive) -> bytes | str | None:
        """The whole body; a string saying which bound it broke; ``None`` if the client left."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limits.max_body_bytes:
                return self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        containers = body.count(b"[") + body.count(b"{")
        most = self.limits.max_body_containers
        if containers > most:
            return (
                f"the request body has {containers} arrays and objects, more than the {most} this API parses"
            )
        items, most = containers + body.count(b","), self.limits.max_body_items
        if items > most:
            return (
                f"the request body has {items} items (commas, brackets), more than the {most} this API parses"
            )
        return body

    def _too_large(self) -> str:
        return (
            f"the request body is larger than {self.limits.max_body_bytes} bytes, the most this API accepts"
        )


async def _answer(
    scope: Scope, send: Send, status: int, detail: str, headers: Mapping[str, str] | None = None
) -> None:
    body = problem_bytes(status, detail, scope["path"])
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_JSON.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *((name.lower().encode(), value.encode()) for name, value in (headers or {}).items()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
