"""The API's HTTP server: uvicorn (h11) with deadlines, a connection cap and trusted proxies.

What uvicorn offers is used as it is: ``limit_concurrency`` (a request on a connection beyond
``max_connections`` is answered 503; uvicorn counts the asking connection too, hence the one
added), ``timeout_keep_alive``, ``h11_max_incomplete_event_size`` (a request head over
``max_header_bytes`` is 400) and its proxy-headers middleware, given the proxies of
``forwarded_allow_ips`` only (uvicorn would trust 127.0.0.1 by default; nobody is trusted
without the setting). What it lacks is a deadline for a request's headers: its only timer runs
between a response and the next request's first byte, so a client that sends half a request
line is held forever. :class:`HeaderDeadline` adds one. The deadline for a body is the body
gate's (:class:`~controller.api.bodylimit.BodyLimit`).

With ``tls`` the port speaks HTTPS with that context (the caller keeps it and reloads renewed
certificates into it: ``api.tls_cert_file``); the header deadline then starts once the
handshake is done, which asyncio bounds at 60 s.

:func:`serve_in_thread` serves an app from a thread with an event loop of its own: the metrics
port, whose ``/healthz`` is the kubelet's liveness probe, so that a busy API loop is not taken
for a dead one.
"""

from __future__ import annotations

import asyncio
import math
import ssl
import threading
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from controller.contract.settings import ApiSettings

__all__ = ["HeaderDeadline", "serve_in_thread", "server_config"]


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol closing a connection whose request head is not whole within
    ``header_timeout_s`` of the connection (or of its previous response)."""

    header_timeout_s: float  # set by server_config's subclass (MPIJC_API__HEADER_TIMEOUT_S)
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head arrived (or was refused): the body has its own deadline

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _expire(self) -> None:
        self._header_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def server_config(
    app: Any, api: ApiSettings, port: int, *, capped: bool = True, tls: ssl.SSLContext | None = None
) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` on ``port`` under ``api``'s deadlines and limits;
    ``capped`` False leaves out the connection cap (the metrics port: probes and Prometheus);
    ``tls``: serve HTTPS with this server context."""

    class Protocol(HeaderDeadline):
        header_timeout_s = api.header_timeout_s

    return uvicorn.Config(
        app,
        host=api.host,
        port=port,
        http=Protocol,
        log_level="warning",
        lifespan="off",
        limit_concurrency=api.max_connections + 1 if capped else None,  # uvicorn counts the one asking
        timeout_keep_alive=api.keep_alive_s,
        timeout_graceful_shutdown=math.ceil(api.shutdown_grace_s),  # event streams never end by themselves
        h11_max_incomplete_event_size=api.max_header_bytes,
        proxy_headers=bool(api.forwarded_allow_ips),
        forwarded_allow_ips=list(api.forwarded_allow_ips),
        ssl_context_factory=None if tls is None else lambda _config, _default: tls,
    )


async def serve_in_thread(server: uvicorn.Server, name: str) -> None:
    """Run ``server`` on a thread and event loop of its own until it exits (set its
    ``should_exit``); what ended it (a port it could not bind) is raised here."""
    ended: list[BaseException] = []

    def serve() -> None:
        try:
            server.run()
        except BaseException as exc:  # uvicorn ends a failed start with SystemExit
            ended.append(exc)

    thread = threading.Thread(target=serve, name=name, daemon=True)
    thread.start()
    await asyncio.to_thread(thread.join)
    if ended:
        raise ended[0]
