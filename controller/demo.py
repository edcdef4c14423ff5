"""What ``mpijob-controller demo`` shows besides the history: deliveries landing somewhere real.

A loopback HTTP endpoint that checks every request's Standard Webhooks signature (as a CI/CD
pipeline receiving our webhooks would, with :func:`controller.webhooks.verify`) and a loopback
SMTP server (aiosmtpd) that keeps the messages. Subscriptions are created through the API
itself (in-process, auth off), so the demo exercises the same validation a user meets.
"""

from __future__ import annotations

import asyncio
import contextlib
import email
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from email.header import decode_header, make_header
from email.message import Message
from typing import Any

import h11
import httpx
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope, Session
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.embedded import free_port
from controller.webhooks import WebhookVerificationError, verify


@dataclass
class WebhookInbox:
    """A webhook receiver on 127.0.0.1 that verifies signatures once it knows the secret."""

    secret: str = ""
    received: list[dict[str, Any]] = field(default_factory=list)
    rejected: int = 0
    port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/ci"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(65536)
                conn.receive_data(data)
                if not data:
                    break
            elif isinstance(event, h11.Request):
                request = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                status = self._accept(request, body)
                writer.write(
                    conn.send(h11.Response(status_code=status, headers=[("content-length", "0")])) or b""
                )
                writer.write(conn.send(h11.EndOfMessage()) or b"")
                await writer.drain()
                conn.start_next_cycle()
                request, body = None, b""
            else:
                break
        writer.close()

    def _accept(self, request: h11.Request | None, body: bytes) -> int:
        headers = {k.decode().lower(): v.decode() for k, v in (request.headers if request else [])}
        try:
            self.received.append(verify(self.secret, body, headers))
        except WebhookVerificationError:
            self.rejected += 1
            return 401
        return 204

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[WebhookInbox]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        try:
            yield self
        finally:
            server.close()
            await server.wait_closed()


@dataclass
class MailInbox:
    """An SMTP server on 127.0.0.1 that keeps what it is sent."""

    messages: list[Message] = field(default_factory=list)
    port: int = field(default_factory=free_port)

    async def handle_DATA(self, server: object, session: Session, envelope: Envelope) -> str:
        content = envelope.content if isinstance(envelope.content, bytes) else str(envelope.content).encode()
        self.messages.append(email.message_from_bytes(content))
        return "250 OK"

    @contextlib.contextmanager
    def running(self) -> Any:
        controller = Controller(self, hostname="127.0.0.1", port=self.port)
        controller.start()
        try:
            yield self
        finally:
            controller.stop()


async def subscribe(engine: AsyncEngine, settings: Any, webhook_url: str, recipient: str) -> str:
    """Create the demo's subscriptions through the API; returns the webhook's signing secret."""
    from controller.api.access import OpenAccess
    from controller.api.app import create_app
    from controller.api.webhooks import build_router
    from controller.metrics import PipelineMetrics

    app = create_app(engine, PipelineMetrics(), OpenAccess(), routers=[build_router(settings.notify)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://demo") as client:
        hook = await client.post(
            "/api/v1/webhooks",
            json={
                "channel": "webhook",
                "url": webhook_url,
                "namespace": "team-a",
                "description": "CI pipeline: every phase change and finding of team-a",
            },
        )
        hook.raise_for_status()
        mail = await client.post(
            "/api/v1/webhooks",
            json={
                "channel": "email",
                "recipients": [recipient],
                "namespace": "team-a",
                "event_types": ["finding.*"],
                "description": "ML team: findings only",
            },
        )
        mail.raise_for_status()
    secret: str = hook.json()["secret"]
    return secret


def summary(hooks: WebhookInbox, mail: MailInbox) -> str:
    """What reached the receivers, for people."""
    kinds: dict[str, int] = {}
    for body in hooks.received:
        kinds[body.get("type", "?")] = kinds.get(body.get("type", "?"), 0) + 1
    lines = [
        f"webhooks received at {hooks.url}: {len(hooks.received)} with valid signatures, "
        f"{hooks.rejected} rejected",
        *(f"   {count:>4} x {kind}" for kind, count in sorted(kinds.items())),
    ]
    example = next((b for b in hooks.received if str(b.get("type", "")).startswith("finding.")), None)
    if example:
        lines += ["   e.g. " + json.dumps(example)[:400]]
    lines.append(f"emails received: {len(mail.messages)}")
    lines += [
        f"   {m['To']}: {' '.join(str(make_header(decode_header(m['Subject']))).split())}"
        for m in mail.messages[:20]
    ]
    return "\n".join(lines)
