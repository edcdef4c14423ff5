"""The admission webhook on a loopback port, and raw TLS sockets sending exactly the bytes an
attacker would: shared by the tests of hostile clients and of exhaustion."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from controller.contract.audit import AuditRecord
from controller.contract.settings import AdmissionSettings
from controller.testing.waits import until
from tests.audit_helpers import T0, Certificate
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.webhook import AdmissionWebhook

GUARD_S = 10.0
"""Longest any exchange may take before the test fails (the webhooks' deadlines here are shorter)."""


class Bus:
    """Takes every record; with ``hold`` set, keeps each publish waiting until released."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.hold = False
        self.waiting = 0
        self._released = asyncio.Event()

    async def __call__(self, records: Sequence[AuditRecord]) -> int:
        if self.hold:
            self.waiting += 1
            await self._released.wait()
        self.records += records
        return len(records)

    def release(self) -> None:
        self.hold = False
        self._released.set()


@contextlib.asynccontextmanager
async def serving(certificate: Certificate, bus: Bus, **limits: Any) -> AsyncIterator[AdmissionWebhook]:
    """The webhook with TLS on a free loopback port, and ``limits`` as its settings."""
    settings = AdmissionSettings(
        host="127.0.0.1", port=0, cert_file=certificate.cert, key_file=certificate.key, **limits
    )
    async with AdmissionWebhook(
        settings, bus, AdmissionMetrics(CollectorRegistry()), clock=lambda: T0
    ) as hook:
        yield hook


class RawClient:
    """One connection speaking bytes, TLS unless ``tls`` is False."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, webhook: AdmissionWebhook, certificate: Certificate, tls: bool = True) -> RawClient:
        context = certificate.trusted() if tls else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1", webhook.port, ssl=context, server_hostname="localhost" if tls else None
            ),
            GUARD_S,
        )
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def answer(self, within_s: float = GUARD_S) -> tuple[int, dict[str, str], Any]:
        """Status, headers and JSON body of the next response."""
        async with asyncio.timeout(within_s):
            head = await self.reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (line.partition(":") for line in lines[1:] if line)
            }
            body = await self.reader.readexactly(int(headers["content-length"]))
        return int(lines[0].split()[1]), headers, json.loads(body)

    async def closed(self, within_s: float = GUARD_S) -> bool:
        """Whether the server closes the connection (EOF or reset) within ``within_s``."""

        async def to_the_end() -> None:
            while await self.reader.read(65536):
                pass

        return not await self._outlasts(to_the_end(), within_s)

    async def still_open(self) -> bool:
        """Whether the connection is open with nothing to read (looked at for a moment)."""
        return await self._outlasts(self.reader.read(1), 0.2)

    @staticmethod
    async def _outlasts(read: Awaitable[object], within_s: float) -> bool:
        """Whether ``read`` is still waiting after ``within_s`` (a reset ends it as its end does)."""
        try:
            async with asyncio.timeout(within_s):
                await read
        except TimeoutError:
            return True
        except (ConnectionError, ssl.SSLError):
            pass
        return False

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError, TimeoutError):
            await asyncio.wait_for(self.writer.wait_closed(), 2)


@contextlib.asynccontextmanager
async def opened(
    webhook: AdmissionWebhook, certificate: Certificate, count: int, tls: bool = True
) -> AsyncIterator[list[RawClient]]:
    """``count`` raw connections to ``webhook``, opened one after the other, closed on the way out."""
    clients: list[RawClient] = []
    try:
        for _ in range(count):
            clients.append(await RawClient.open(webhook, certificate, tls))
        yield clients
    finally:
        for client in clients:
            await client.close()


async def emptied(webhook: AdmissionWebhook) -> None:
    """Until ``webhook`` holds no connection."""
    await until(lambda: len(webhook.capacity) == 0, what=lambda: f"{len(webhook.capacity)} connections")
