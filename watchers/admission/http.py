"""One HTTP/1.1 connection of the webhook (h11): bounded headers, a deadline per request, an
idle timeout between requests, JSON error answers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Sequence
from typing import Any, Final

import h11

from watchers.admission.capacity import Slot
from watchers.admission.metrics import AdmissionMetrics

__all__ = ["CLOSE", "Http", "HttpReply", "TooSlow", "content_length", "error"]

MAX_HEADER_BYTES = 64 << 10


HttpReply = tuple[int, bytes, str, list[tuple[str, str]]]


def error(status: int, message: str, *headers: tuple[str, str]) -> HttpReply:
    return status, json.dumps({"error": message}).encode(), "application/json", list(headers)


CLOSE: Final = ("connection", "close")


class TooSlow(Exception):
    """The request's headers and body did not arrive within ``request_timeout_s``."""


class Http:
    """One HTTP/1.1 connection (h11) with a deadline per request, from its first byte to its last,
    and ``idle_s`` for the first byte of the next; ``slot`` learns when the client is waited for."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        budget_s: float,
        idle_s: float,
        metrics: AdmissionMetrics,
        slot: Slot,
    ) -> None:
        self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.reader, self.writer, self.metrics, self.slot = reader, writer, metrics, slot
        self.budget_s, self.idle_s = budget_s, idle_s
        self.deadline: float | None = None
        """Loop time by which the current request must be complete; None between requests."""
        self._loop = asyncio.get_running_loop()

    async def next_event(self) -> Any:
        while True:
            event = self.conn.next_event()
            if event is not h11.NEED_DATA:
                return event
            self.slot.wait()
            if self.deadline is None:  # between requests: wait for the next one's first bytes
                data = await asyncio.wait_for(self.reader.read(65536), self.idle_s)
                self.deadline = self._loop.time() + self.budget_s
            else:
                left = max(self.deadline - self._loop.time(), 0.0)
                try:
                    data = await asyncio.wait_for(self.reader.read(65536), left)
                except TimeoutError:
                    raise TooSlow from None
            self.conn.receive_data(data)

    async def send(self, reply: HttpReply) -> None:
        status, payload, content_type, extra = reply
        if status >= 400:
            self.metrics.rejected.labels(str(status)).inc()
        headers = [("content-type", content_type), ("content-length", str(len(payload))), *extra]
        data = self.conn.send(h11.Response(status_code=status, headers=headers))
        self.writer.write((data or b"") + (self.conn.send(h11.Data(data=payload)) or b""))
        self.writer.write(self.conn.send(h11.EndOfMessage()) or b"")
        await asyncio.wait_for(self.writer.drain(), self.budget_s)  # a client that does not read: dropped

    async def linger(self, most: int, seconds: float = 1.0) -> None:
        """Discard what the client still sends (at most ``most`` bytes, ``seconds``) before closing.

        A client still sending the body it was refused would otherwise get a reset instead of
        the answer; nothing is kept, so this costs no memory.
        """
        end = self._loop.time() + seconds
        with contextlib.suppress(TimeoutError, ConnectionError, ssl.SSLError):
            while most > 0 and (left := end - self._loop.time()) > 0:
                data = await asyncio.wait_for(self.reader.read(65536), left)
                if not data:
                    return
                most -= len(data)

    async def refuse(self, status: int, message: str) -> None:
        """Answer and close, unless an answer can no longer be sent on this connection."""
        if self.conn.our_state in {h11.IDLE, h11.SEND_RESPONSE}:
            await self.send(error(status, message, CLOSE))


def content_length(headers: Sequence[tuple[bytes, bytes]]) -> int | None:
    """The declared Content-Length (h11 has checked it is one number), or None (chunked)."""
    for name, value in headers:
        if name == b"content-length":
            return int(value)
    return None
