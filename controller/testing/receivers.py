"""Real loopback receivers, an HTTP/1.1 webhook endpoint and an SMTP server, for tests and the demo.

Every request is recorded with its arrival time and checked with
:func:`controller.contract.signing.verify` against the secret registered for its path; what each
path answers is scripted (status, headers, delay), one reply per request, then decided from each
request's JSON body (``decide``) or ``answer(path)`` (200 unless told otherwise).
:class:`SmtpSink` is a real SMTP server (aiosmtpd) keeping every message it is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
import json
import ssl
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any

import h11
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from controller.contract.settings import SmtpSettings
from controller.contract.signing import WebhookVerificationError, verify
from controller.testing.ports import free_port
from controller.testing.waits import until


async def _next_event(conn: h11.Connection, reader: asyncio.StreamReader) -> object:
    """The next HTTP event of ``conn``, reading from ``reader`` as h11 asks for more bytes."""
    while (event := conn.next_event()) is h11.NEED_DATA:
        conn.receive_data(await reader.read(65536))
    return event


@dataclass(frozen=True)
class Reply:
    """What one request gets."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    body: bytes = b""


@dataclass(frozen=True)
class Received:
    """One request as it arrived."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float
    status: int
    verified: bool
    error: str | None = None

    @property
    def payload(self) -> Any:
        return json.loads(self.body)

    @property
    def webhook_id(self) -> str:
        return self.headers["webhook-id"]


class Receiver:
    """Serves ``http://127.0.0.1:<port>/<path>`` (``https`` with ``tls``, a server context);
    start with ``async with Receiver() as r``."""

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        answer: Callable[[str], Reply] = lambda path: Reply(),
        port: int = 0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.requests: list[Received] = []
        self.secrets: dict[str, str] = {}
        self._scripts: dict[str, list[Reply]] = defaultdict(list)
        self._deciders: dict[str, Callable[[Any], Reply | None]] = {}
        self._clock = clock
        self._answer = answer
        self._server: asyncio.Server | None = None
        self.port = port
        self._tls = tls
        self._arrived = asyncio.Condition()

    async def __aenter__(self) -> Receiver:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", self.port, backlog=4096, ssl=self._tls
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 1)

    def url(self, path: str) -> str:
        scheme = "https" if self._tls else "http"
        return f"{scheme}://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def script(self, path: str, *replies: Reply) -> None:
        """The next requests to ``path`` get ``replies``, in order; later ones get 200."""
        self._scripts["/" + path.lstrip("/")].extend(replies)

    def decide(self, path: str, decider: Callable[[Any], Reply | None]) -> None:
        """Requests to ``path`` past its script get ``decider(payload)`` (the JSON body), or the
        usual answer where it returns None: a reply that waits for what has arrived so far."""
        self._deciders["/" + path.lstrip("/")] = decider

    def _reply(self, path: str, body: bytes) -> Reply:
        if self._scripts[path]:
            return self._scripts[path].pop(0)
        decider = self._deciders.get(path)
        decided = decider(json.loads(body)) if decider is not None else None
        return decided if decided is not None else self._answer(path)

    def at(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path == "/" + path.lstrip("/")]

    async def wait_for(self, path: str, count: int, timeout_s: float = 10.0) -> list[Received]:
        """The first ``count`` requests to ``path``, waiting for them to arrive."""
        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: len(self.at(path)) >= count), timeout_s)
        return self.at(path)[:count]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests parsed by ``h11`` (keep-alive, as webhook senders use it)."""
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await _next_event(conn, reader)
                if not isinstance(request, h11.Request):
                    return  # closed, or the peer is done with the connection
                body = b""
                while isinstance(event := await _next_event(conn, reader), h11.Data):
                    body += bytes(event.data)
                if not isinstance(event, h11.EndOfMessage):
                    return
                path = request.target.decode("latin-1")
                headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in request.headers}
                reply = self._reply(path, body)
                await self._record(path, headers, body, self._clock(), reply.status)
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                head = [("content-length", str(len(reply.body))), *reply.headers.items()]
                writer.write(conn.send(h11.Response(status_code=reply.status, headers=head)) or b"")
                writer.write(conn.send(h11.Data(data=reply.body)) or b"")
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        except (h11.ProtocolError, ConnectionError):
            pass
        except asyncio.CancelledError:  # the server is closing under a slow reply: nothing to report
            pass
        finally:
            writer.close()

    async def _record(self, path: str, headers: dict[str, str], body: bytes, at: float, status: int) -> None:
        secret = self.secrets.get(path.lstrip("/"))
        verified = False
        error: str | None = "no secret registered"
        if secret is not None:
            try:
                verify(secret, body, headers)
                verified, error = True, None
            except WebhookVerificationError as exc:
                error = str(exc)
        async with self._arrived:
            self.requests.append(Received(path, headers, body, at, status, verified, error))
            self._arrived.notify_all()


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.envelopes: list[Envelope] = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        content = envelope.content or b""
        raw = content.encode() if isinstance(content, str) else content
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        with self.lock:
            self.messages.append(parsed)
            self.envelopes.append(envelope)
        return "250 Message accepted for delivery"


class SmtpSink:
    """A real SMTP server (aiosmtpd) on loopback, in its own thread, keeping what it receives.

    Runs inside ``with SmtpSink() as sink``."""

    def __enter__(self) -> SmtpSink:
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()

    def __init__(self) -> None:
        self._inbox = _Inbox()
        self.port = free_port()
        self._controller = Controller(self._inbox, hostname="127.0.0.1", port=self.port)

    @property
    def settings(self) -> SmtpSettings:
        return SmtpSettings(host="127.0.0.1", port=self.port, security="none", timeout_s=5.0)

    @property
    def messages(self) -> list[EmailMessage]:
        with self._inbox.lock:
            return list(self._inbox.messages)

    @property
    def recipients(self) -> list[list[str]]:
        with self._inbox.lock:
            return [list(e.rcpt_tos) for e in self._inbox.envelopes]

    async def wait_for(self, count: int, timeout_s: float = 10.0) -> list[EmailMessage]:
        async def enough() -> bool:
            return len(self.messages) >= count

        await until(enough, timeout_s)
        return self.messages
