"""The long requests: a watch and a followed log, read in one thread and closed from any other.

:class:`~controller.kube.gateway.KubeGateway` opens them (``watch``, ``follow_log``); they send
their one ``GET`` through the gateway's request path (retries and error translation included) on
the first read, and raise :mod:`controller.kube.errors` classes: a watch's ``ERROR`` event as the
matching :class:`~controller.kube.errors.APIError`, a broken connection as
:class:`~controller.kube.errors.APIUnavailableError`.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import threading
from collections.abc import Iterator
from typing import Literal, Protocol, cast

import urllib3

from controller.kube.errors import error_from_status, unavailable
from controller.kube.resources import RawStatus, RawWatchEvent, Resource

__all__ = [
    "FOLLOW_READ_TIMEOUT_S",
    "Buffered",
    "ChunkedBody",
    "LogFollow",
    "Query",
    "Requester",
    "WatchStream",
]

Query = list[tuple[str, str]]

_READ_SIZE = 64 * 1024
"""Bytes asked of the socket per read; lines longer than this are joined across reads."""


class Requester(Protocol):
    """The one call a long request makes (:meth:`controller.kube.gateway.KubeGateway.request`)."""

    def request(
        self,
        method: Literal["GET"],
        path: str,
        *,
        query: Query | None = None,
        accept: str = ...,
        read_timeout_s: float = ...,
    ) -> urllib3.BaseHTTPResponse: ...


class _LongRequest:
    """One long ``GET`` (a watch, a followed log): read in one thread, :meth:`close` from any other.

    The request is sent on the first read (:meth:`_open`); :meth:`close` shuts the socket down so a
    read blocked in another thread returns at once. Only the reading thread closes the response
    (closing it under a read in progress breaks ``http.client`` mid-chunk), once the read ended."""

    def __init__(
        self, gateway: Requester, path: str, query: Query, read_timeout_s: float, accept: str
    ) -> None:
        self._gateway = gateway
        self._path = path
        self._query = query
        self._read_timeout_s = read_timeout_s
        self._accept = accept
        self._lock = threading.Lock()
        self._closed = False
        self._response: urllib3.BaseHTTPResponse | None = None

    def _open(self) -> urllib3.BaseHTTPResponse | None:
        """Send the request; ``None`` if :meth:`close` came first (or meanwhile)."""
        if self._closed:
            return None
        response = self._gateway.request(
            "GET", self._path, query=self._query, accept=self._accept, read_timeout_s=self._read_timeout_s
        )
        with self._lock:
            self._response = response
            closed = self._closed
        if closed:
            response.close()
            return None
        return response

    def close(self) -> None:
        """Stop reading: safe from any thread, any number of times."""
        with self._lock:
            self._closed = True
            response = self._response
        if response is not None:
            # shutdown() unblocks a read in progress; it refuses if the stream already ended.
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                response.shutdown()


class WatchStream(_LongRequest):
    """One watch request: iterate it in one thread, :meth:`close` it from any other.

    The request is sent on the first ``next()``. Lines are parsed as they arrive; ``ERROR``
    events are raised as :class:`APIError` (410 as :class:`APIGoneError`), a broken connection
    as :class:`APIUnavailableError`. The iterator ends when the server ends the stream (its
    ``timeoutSeconds`` passed) or after :meth:`close`.
    """

    def __init__(
        self, gateway: Requester, resource: Resource, path: str, query: Query, read_timeout_s: float
    ) -> None:
        super().__init__(gateway, path, query, read_timeout_s, "application/json")
        self._resource = resource
        self._events = self._generate()

    def __iter__(self) -> Iterator[RawWatchEvent]:
        return self

    def __next__(self) -> RawWatchEvent:
        return next(self._events)

    def _generate(self) -> Iterator[RawWatchEvent]:
        response = self._open()
        if response is None:
            return
        try:
            for line in _iter_lines(response):
                try:
                    event = json.loads(line)
                except ValueError as exc:
                    raise unavailable(f"watch {self._resource}: unparseable line", exc) from exc
                if isinstance(event, dict) and event.get("type") == "ERROR":
                    status = cast(RawStatus, event.get("object") or {})
                    raise error_from_status(int(status.get("code") or 0), status, "watch ERROR event")
                yield cast(RawWatchEvent, event)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self._closed:
                raise unavailable(f"watch {self._resource}", exc) from exc
        finally:
            response.close()


def _iter_lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Newline-delimited lines of a streamed body, yielded as soon as each is complete.

    ``read1`` returns whatever has arrived (chunked or not), where ``read(n)`` would wait for
    ``n`` bytes; a watch line can be larger than one read, so partial lines are buffered.
    """
    pending = b""
    while chunk := response.read1(_READ_SIZE):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


FOLLOW_READ_TIMEOUT_S = 300.0
"""Seconds of silence on a followed log before the follow is given up and opened again (from where
it stood): a quiet container costs one request per five minutes, a dead connection no longer."""


_MAX_CHUNK_HEADER = 4096
"""Bytes a chunk's size line (with extensions) may take, as ``http.client`` bounds it (65,536)
for a whole line: a peer sending more is not speaking HTTP."""


class Buffered(Protocol):
    """A connection's read buffer (``io.BufferedReader``): what it holds, or one read of the socket."""

    def read1(self, size: int = ..., /) -> bytes: ...


class ChunkedBody:
    """A chunked response body read off its connection's buffer: each :meth:`read` hands over
    the data of every chunk that has arrived, across chunk boundaries, in one read of the
    socket (or of what the connection's buffer already holds).

    ``http.client`` (under urllib3's ``read1``) returns at most one chunk per call and reads each
    size line with its own ``readline``: a followed log arrives a line or a few per chunk, so
    that was a dozen Python calls per line on the reading thread. Here the framing of all the
    chunks of one read is decoded at once. ``b""`` after the last chunk (its trailers, if any,
    are not read: the connection is not reused); a connection closed before it is
    :class:`http.client.IncompleteRead`."""

    def __init__(self, raw: Buffered) -> None:
        self._raw = raw
        self._left = 0
        """Data bytes of the current chunk not read yet."""
        self._skip = 0
        """Bytes of the CRLF that ends the current chunk's data not read yet."""
        self._header = b""
        """The start of a size line cut by the end of a read."""
        self._done = False

    def read(self, size: int) -> bytes:
        """The data that has arrived (at most ``size`` bytes of the wire read), waiting for some;
        ``b""`` at the end of the body."""
        while not self._done:
            wire = self._raw.read1(size)
            if not wire:
                raise http.client.IncompleteRead(b"")
            if data := self._decode(wire):
                return data
        return b""

    @property
    def caught_up(self) -> bool:
        """Whether the reads so far ended where a chunk did: what the server wrote was all read
        (lines as a container prints them), not a chunk a read cut (a backlog still arriving)."""
        return not (self._left or self._skip or self._header)

    def _decode(self, wire: bytes) -> bytes:
        """The chunks' data in ``wire``, the framing kept track of across reads."""
        if self._header:
            wire, self._header = self._header + wire, b""
        end = len(wire)
        at = 0
        parts: list[bytes] = []
        while at < end:
            if self._left:
                taken = min(self._left, end - at)
                parts.append(wire[at : at + taken])
                at += taken
                self._left -= taken
                if not self._left:
                    self._skip = 2
                continue
            if self._skip:
                skipped = min(self._skip, end - at)
                at += skipped
                self._skip -= skipped
                continue
            line_end = wire.find(b"\r\n", at, at + _MAX_CHUNK_HEADER)
            if line_end < 0:
                if end - at >= _MAX_CHUNK_HEADER:
                    raise http.client.LineTooLong("chunk size")
                self._header = wire[at:]
                break
            try:
                self._left = int(wire[at:line_end].split(b";", 1)[0], 16)
            except ValueError:
                raise http.client.IncompleteRead(b"") from None
            at = line_end + 2
            if not self._left:  # the last chunk: the body ends
                self._done = True
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)


def chunked_body(response: urllib3.BaseHTTPResponse) -> ChunkedBody | None:
    """The body of a chunked, uncompressed ``response`` none of which was read yet, read off its
    connection's buffer (:class:`ChunkedBody`); None for any other (read by ``read1``)."""
    inner = getattr(response, "_fp", None)  # urllib3's http.client response: its fp is the socket's buffer
    if not (
        isinstance(inner, http.client.HTTPResponse)
        and inner.chunked
        and inner.chunk_left is None
        and inner.fp is not None
        and response.headers.get("content-encoding", "identity").lower() == "identity"
        and response.tell() == 0
    ):
        return None
    return ChunkedBody(inner.fp)


class LogFollow(_LongRequest):
    """One followed container log (``follow=true&timestamps=true``): :meth:`read` what has arrived
    in one thread, :meth:`close` from any other.

    The request is sent on the first :meth:`read`. ``b""`` is the end: the container ended (or
    :meth:`close`). A connection that breaks is :class:`APIUnavailableError`, also in the
    middle of a line: the caller resumes from the last whole line it kept."""

    def __init__(self, gateway: Requester, path: str, query: Query, read_timeout_s: float) -> None:
        super().__init__(gateway, path, query, read_timeout_s, "text/plain")
        self._reading = False
        self._body: ChunkedBody | None = None

    def read(self, size: int = _READ_SIZE) -> bytes:
        """The bytes that have arrived (at most ``size`` read off the connection: every chunk
        it holds, :class:`ChunkedBody`), waiting for some; ``b""`` at the end."""
        response = self._response
        if response is None:
            response = self._open()
            self._body = None if response is None else chunked_body(response)
        with self._lock:
            if response is None or self._closed:
                return b""
            self._reading = True
        try:
            data = response.read1(size) if self._body is None else self._body.read(size)
        except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
            response.close()
            if self._closed:
                return b""
            raise unavailable(f"follow {self._path}", exc) from exc
        finally:
            with self._lock:
                self._reading = False
        if not data:
            response.close()
        return data

    def caught_up(self) -> bool:
        """Whether the last read ended where a chunk did (:attr:`ChunkedBody.caught_up`); False
        where the body is not read by chunks."""
        return self._body is not None and self._body.caught_up

    def close(self) -> None:
        """Stop following: safe from any thread, any number of times; the response is closed here
        unless a read is in progress (which then ends, and closes it)."""
        super().close()
        with self._lock:
            idle = None if self._reading else self._response
        if idle is not None:
            with contextlib.suppress(ValueError, RuntimeError, OSError):
                idle.close()
