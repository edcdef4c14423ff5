"""Request bodies over a limit are answered 413 before they are read whole, and before any route runs.

A pure ASGI middleware, outside routing and authentication: a declared ``Content-Length``
over the limit is refused without reading a byte; a body without one (chunked) is counted
as it streams in and refused as soon as the count passes the limit, so an unauthenticated
client can make the server hold at most ``max_bytes`` plus one chunk. A body within the
limit is read here (it would be read whole by the route anyway) and handed on unchanged.
The 413 closes the connection, so the unread rest of the body is never waited for.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyLimit"]

_MAX_LENGTH_DIGITS = 18
"""More digits than this is over any limit (and ``int()`` refuses very long digit strings)."""


class BodyLimit:
    """Answers 413 to a request whose body is larger than ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        lengths = [value for name, value in scope["headers"] if name == b"content-length"]
        if len(lengths) > 1 or (lengths and not lengths[0].isdigit()):
            await _answer(send, 400, "the Content-Length header is not one non-negative integer")
            return
        if lengths and (len(lengths[0]) > _MAX_LENGTH_DIGITS or int(lengths[0]) > self.max_bytes):
            await _answer(send, 413, self._too_large())
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left before sending its whole request: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _answer(send, 413, self._too_large())
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        whole: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal whole
            if whole is not None:
                message, whole = whole, None
                return message
            return await receive()  # after the body: http.disconnect, as the server reports it

        await self.app(scope, replay, send)

    def _too_large(self) -> str:
        return f"the request body is larger than {self.max_bytes} bytes, the most this API accepts"


async def _answer(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
