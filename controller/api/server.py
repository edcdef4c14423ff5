"""The API's HTTP server: uvicorn (h11) with deadlines, a connection cap, per-client shares and
trusted proxies.

What uvicorn offers is used as it is: ``limit_concurrency`` (a request on a connection beyond
``max_connections`` is answered 503; uvicorn counts the asking connection too, hence the one
added), ``timeout_keep_alive``, ``h11_max_incomplete_event_size`` (a request head over
``max_header_bytes`` is 400) and its proxy-headers middleware, given the proxies of
``forwarded_allow_ips`` only (uvicorn would trust 127.0.0.1 by default; nobody is trusted
without the setting). What it lacks is added here:

- a deadline for a request's headers (:class:`HeaderDeadline`): uvicorn's only timer runs
  between a response and the next request's first byte, so a client that sends half a request
  line is held forever. A new connection's first head has ``first_header_timeout_s`` (a client
  sends it right after connecting), a later one ``header_timeout_s`` from the previous response;
- a share of the connections per client (:class:`ClientShares`): the cap counts every
  connection, finished head or not, so one address holding half-open connections would make
  everyone else's requests 503. A peer address holds at most ``max_connections_per_address``
  connections: one more is answered 429 and closed as it connects, before it can hold anything.
  A trusted proxy holds every connection of the clients behind it, so its connection counts
  against its address only until its first request head is whole (a router forwards a head
  whole, at once; a pod of a trusted network holding half-open connections is still bounded);
  the share is then applied to the forwarded address, as requests in flight per client
  (uvicorn's proxy-headers middleware, running first, has put the X-Forwarded-For client in the
  scope): one more is answered 429.

The deadline for a body is the body gate's (:class:`~controller.api.bodylimit.BodyLimit`).

With ``tls`` the port speaks HTTPS with that context (the caller keeps it and reloads renewed
certificates into it: ``api.tls_cert_file``); the header deadlines and the address's share
then start once the handshake is done, which asyncio bounds at 60 s.

:func:`forwarded_config` is the second listener, for OpenShift's OAuth proxy beside the API in its
pod: on the pod's loopback only, where the forwarded access token is read
(:class:`~controller.api.auth.ForwardedTokens`).

:func:`serve_in_thread` serves an app from a thread with an event loop of its own: the metrics
port, whose ``/healthz`` is the kubelet's liveness probe, so that a busy API loop is not taken
for a dead one.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
import ssl
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import h11
import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from controller.api.access import AccessReviewer
from controller.api.auth import ForwardedTokens
from controller.contract.settings import ApiSettings

__all__ = [
    "LOOPBACK",
    "ClientShares",
    "HeaderDeadline",
    "forwarded_config",
    "serve_in_thread",
    "server_config",
]

LOOPBACK = "127.0.0.1"
"""Where the OAuth proxy's listener binds: the pod's own loopback, which no other pod reaches."""

_RETRY_AFTER_S = 1
"""What a client over its share is told to wait: one of its own connections or requests ends soon."""


class ClientShares:
    """Connections held per peer address, and requests in flight per client address, each at most
    ``per_address``; the peers in ``proxies`` (addresses or networks) hold their clients'
    connections, so theirs count only until the first request head (:class:`HeaderDeadline`)."""

    def __init__(self, per_address: int, proxies: Sequence[str] = ()) -> None:
        self.per_address = per_address
        self._proxies = [ipaddress.ip_network(entry, strict=False) for entry in proxies]
        self._connections: Counter[str] = Counter()
        self._requests: Counter[str] = Counter()

    def connections(self, address: str) -> int:
        """Connections ``address`` holds now."""
        return self._connections[address]

    def requests(self, address: str) -> int:
        """Requests of client ``address`` in flight now."""
        return self._requests[address]

    def is_proxy(self, address: str) -> bool:
        """Whether ``address`` is a trusted proxy's (``forwarded_allow_ips``)."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in network for network in self._proxies)

    def connect(self, address: str) -> bool:
        """Count a new connection from ``address``; False (and nothing counted) beyond its share."""
        return self._take(self._connections, address)

    def disconnect(self, address: str) -> None:
        """A connection :meth:`connect` counted is gone."""
        self._give_back(self._connections, address)

    def begin(self, address: str) -> bool:
        """Count a request of client ``address``; False (and nothing counted) beyond its share."""
        return self._take(self._requests, address)

    def end(self, address: str) -> None:
        """A request :meth:`begin` counted is answered."""
        self._give_back(self._requests, address)

    def _take(self, held: Counter[str], address: str) -> bool:
        """One more for ``address`` in ``held``; False (and nothing counted) beyond its share."""
        if held[address] >= self.per_address:
            return False
        held[address] += 1
        return True

    @staticmethod
    def _give_back(held: Counter[str], address: str) -> None:
        """One fewer for ``address`` in ``held``; an address holding none is forgotten."""
        held[address] -= 1
        if held[address] <= 0:
            del held[address]

    def refusal(self, what: str, address: str) -> str:
        """Why a client over its share is refused."""
        return (
            f"{address} holds {self.per_address} {what}, the most one client may "
            "(api.max_connections_per_address); retry when one ends"
        )


class RequestShare:
    """ASGI middleware: requests in flight per client address (the forwarded one behind a trusted
    proxy) at most ``shares.per_address``; one more is 429 with Retry-After."""

    def __init__(self, app: ASGIApp, shares: ClientShares) -> None:
        self.app = app
        self.shares = shares

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if scope["type"] != "http" or not client:
            await self.app(scope, receive, send)
            return
        address = str(client[0])
        if not self.shares.begin(address):
            refused = JSONResponse(
                {"detail": self.shares.refusal("requests in flight", address)},
                429,
                headers={"Retry-After": str(_RETRY_AFTER_S), "Connection": "close"},
            )
            await refused(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.shares.end(address)


def _refused(detail: str) -> bytes:
    """A whole 429 response, sent on a connection over its address's share as it connects."""
    body = JSONResponse({"detail": detail}).body
    head = (
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\n"
        f"retry-after: {_RETRY_AFTER_S}\r\nconnection: close\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


class HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol closing a connection whose request head is not whole within
    ``first_header_timeout_s`` of connecting, or ``header_timeout_s`` of its previous response;
    with ``shares``, refusing a connection beyond its address's share as it connects, and
    counting a trusted proxy's connection only until its first head is whole."""

    header_timeout_s: float  # set by server_config's subclass (MPIJC_API__HEADER_TIMEOUT_S)
    first_header_timeout_s: float  # MPIJC_API__FIRST_HEADER_TIMEOUT_S
    shares: ClientShares | None = None  # None: not shared out (the metrics port)
    _header_timer: asyncio.TimerHandle | None = None
    _counted: str | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        address = self.client[0] if self.client else None
        if self.shares is not None and address is not None:
            if not self.shares.connect(address):
                transport.write(_refused(self.shares.refusal("connections", address)))
                transport.close()
                return
            self._counted = address
        self._arm(self.first_header_timeout_s)

    def data_received(self, data: bytes) -> None:
        if self.transport.is_closing():
            return  # refused as it connected: nothing it sends is read
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._disarm()  # the head arrived (or was refused): the body has its own deadline
            if self._counted is not None and self.shares is not None and self.shares.is_proxy(self._counted):
                self._uncount()  # a proxy's requests are counted per forwarded client from now on

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm(self.header_timeout_s)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._uncount()
        super().connection_lost(exc)

    def _uncount(self) -> None:
        if self.shares is not None and self._counted is not None:
            self.shares.disconnect(self._counted)
            self._counted = None

    def _arm(self, timeout_s: float) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(timeout_s, self._expire)

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
    ``capped`` False leaves out the connection cap and the clients' shares (the metrics port:
    probes and Prometheus); ``tls``: serve HTTPS with this server context."""
    client_shares = ClientShares(api.max_connections_per_address, api.forwarded_allow_ips) if capped else None

    class Protocol(HeaderDeadline):
        header_timeout_s = api.header_timeout_s
        first_header_timeout_s = api.first_header_timeout_s
        shares = client_shares

    return uvicorn.Config(
        RequestShare(app, client_shares) if client_shares is not None else app,
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


def forwarded_config(app: Any, api: ApiSettings, reviewer: AccessReviewer) -> uvicorn.Config:
    """uvicorn's configuration for the OAuth proxy's listener: ``app`` behind
    :class:`~controller.api.auth.ForwardedTokens` (forwarded tokens reviewed by ``reviewer``) on
    :data:`LOOPBACK`, port ``api.forwarded_token_port``, plain HTTP (the proxy ends TLS; the hop
    never leaves the pod), under the same deadlines and caps as the API port. The proxy is trusted
    for X-Forwarded-For as the routers of ``api.forwarded_allow_ips`` are, so each client behind it
    keeps its own share and failure bucket."""
    if api.forwarded_token_port is None:
        raise ValueError("MPIJC_API__FORWARDED_TOKEN_PORT is unset: there is no OAuth proxy listener")
    proxies = [LOOPBACK, *api.forwarded_allow_ips]
    proxied = api.model_copy(update={"host": LOOPBACK, "forwarded_allow_ips": proxies})
    return server_config(ForwardedTokens(app, reviewer), proxied, api.forwarded_token_port)


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
