"""The client's one door to the API: where it is, the caller's bearer token, JSON reads, and
Server-Sent Events that survive a lost connection. The Python client (:mod:`controller.client`)
and every command that asks the API go through it.

httpx's errors and the API's status codes are translated here and nowhere else, into
:mod:`controller.client.errors` (:func:`raise_for`).

Server-Sent Events (a job's events for ``wait``, a run's lines for ``logs(follow=True)``) are read
by :meth:`Connection.events`: a lost connection (an API restart, a rolling update, a proxy's idle
timeout) is reopened with backoff, up to 30 s apart, resuming with ``Last-Event-ID`` so nothing is
missed.

The token is ``token``, else the file ``token_file`` (``MPIJC_CLIENT__TOKEN``,
``MPIJC_CLIENT__TOKEN_FILE``: a pod's service-account token by default; where that does not exist
and the API is on loopback, the token of the local API that ``demo --serve`` runs,
``MPIJC_CLIENT__LOCAL_TOKEN_FILE``). A file is read again for every request, as projected tokens
rotate.

A token goes over plain ``http://`` to a loopback address only: to any other host it would
cross a network in clear, where whoever reads it can use it (a pod's service-account token
against the kube-apiserver too). Elsewhere the client wants ``https://`` (``ca_file`` for a
cluster's own CA) and refuses before connecting, unless told ``allow_insecure_http``
(``MPIJC_CLIENT__ALLOW_INSECURE_HTTP``, the commands' ``--insecure-http``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import re
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse
from pydantic import ValidationError

from controller.client.errors import NotFound, Refused, Unreachable, UsageError
from controller.contract.credentials import tls_context
from controller.contract.settings import ClientSettings

__all__ = [
    "MAX_BACKOFF_S",
    "MAX_TOKEN_BYTES",
    "READ_TIMEOUT_S",
    "Connection",
    "NoticeCallback",
    "authorization",
    "is_loopback",
    "raise_for",
    "settings_with",
    "tls_verification",
]

log = logging.getLogger("controller.client")

MAX_BACKOFF_S = 30.0
"""The longest pause between attempts to reopen a lost event stream."""
READ_TIMEOUT_S = 90.0
"""An event stream silent this long (no event, no heartbeat: the API sends one every 15 s) is
taken for lost and reopened."""
MAX_TOKEN_BYTES = 16 * 1024
"""A Kubernetes service-account token is 1-2 KiB; the API reads request heads of at most 32 KiB."""
_TOKEN = re.compile(r"^[\x21-\x7e]+$")
"""Printable ASCII without spaces: anything else cannot travel in an ``Authorization`` header."""

NoticeCallback = Callable[[str], None]
"""Told one line when an event stream is lost and about to be reopened."""


def _checked(token: str, where: str) -> str:
    token = token.strip()
    if not token:
        raise Refused(f"{where}: the token is empty")
    if len(token) > MAX_TOKEN_BYTES:
        raise Refused(f"{where}: the token is longer than {MAX_TOKEN_BYTES} bytes")
    if not _TOKEN.fullmatch(token):
        raise Refused(f"{where}: the token holds spaces or characters an HTTP header cannot carry")
    return token


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's host name or address) is this machine's loopback interface."""
    if host.lower() in {"localhost", "localhost."}:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _check_transport(client: ClientSettings) -> None:
    """:class:`Refused` when the token would go over plain http to another machine, unless allowed."""
    url = urlsplit(client.api_url)
    if url.scheme != "http" or client.allow_insecure_http or is_loopback(url.hostname or ""):
        return
    raise Refused(
        f"refusing to send the token over plain http to {url.netloc}, which is not this machine: use "
        "https:// (with --ca-file for the cluster's CA), or --insecure-http "
        "(MPIJC_CLIENT__ALLOW_INSECURE_HTTP=true) if that network is yours alone"
    )


def tls_verification(client: ClientSettings) -> ssl.SSLContext | bool:
    """How an https API's certificate is checked: against ``client.ca_file`` when set, else the
    system's CAs (True). ``OSError``/``ssl.SSLError`` when the file cannot be loaded."""
    if client.ca_file is None:
        return True
    return tls_context(client.ca_file)


def authorization(client: ClientSettings) -> dict[str, str]:
    """The ``Authorization`` header for ``client``'s token, its file read now; :class:`Refused`
    naming the setting when there is none to send, or naming ``--insecure-http`` when it would go
    over plain http to another machine."""
    _check_transport(client)
    if client.token is not None:
        token = _checked(client.token.get_secret_value(), "--token or MPIJC_CLIENT__TOKEN")
        return {"Authorization": f"Bearer {token}"}
    path = _token_file(client)
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_TOKEN_BYTES + 1)
    except OSError as exc:
        raise Refused(f"MPIJC_CLIENT__TOKEN_FILE: cannot read {path}: {exc.strerror}") from exc
    text = raw.decode("utf-8", errors="replace")
    return {"Authorization": f"Bearer {_checked(text, f'MPIJC_CLIENT__TOKEN_FILE {path}')}"}


def _token_file(client: ClientSettings) -> Path:
    """``client.token_file``; for an API on loopback, when that is the default (a pod's token) and
    does not exist, the token file of the local API ``demo --serve`` runs, if it is there."""
    path = Path(client.token_file)
    if client.token_file != ClientSettings.model_fields["token_file"].default or path.exists():
        return path
    local = Path(client.local_token_file)
    if is_loopback(urlsplit(client.api_url).hostname or "") and local.is_file():
        return local
    return path


def raise_for(response: httpx.Response) -> None:
    """Nothing for a 2xx; else the error its status means, with the API's ``detail`` in one line."""
    status = response.status_code
    if status < 300:
        return
    try:
        body = response.json()
        detail = body.get("detail", response.text) if isinstance(body, dict) else response.text
    except ValueError:
        detail = response.text
    if isinstance(detail, list):  # a validation error: FastAPI's list of {loc, msg, type}
        detail = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())[1:])}: {e.get('msg')}"
            for e in detail
            if isinstance(e, dict)
        )
    line = " ".join(str(detail).split())[:500] or response.reason_phrase
    if status == 429 or status >= 500:
        after = response.headers.get("Retry-After", "")
        raise Unreachable(f"HTTP {status}: {line}", float(after) if after.isdigit() else None)
    raise (NotFound if status == 404 else Refused)(f"HTTP {status}: {line}")


def settings_with(base: ClientSettings, overrides: Mapping[str, Any]) -> ClientSettings:
    """``base`` with ``overrides`` (``api_url``, ``token``, ``token_file``, ``ca_file``,
    ``allow_insecure_http``; None: keep) over it, checked: either token replaces both token
    settings, ``token`` winning; :class:`UsageError` naming what is malformed (an API URL that is
    not http(s), a CA file that cannot be loaded)."""
    merged = base.model_dump()
    merged["token"] = base.token.get_secret_value() if base.token is not None else None
    given = {key: value for key, value in overrides.items() if value is not None}
    if "token_file" in given:
        merged["token"] = None
    merged.update(given)
    try:
        client = ClientSettings.model_validate(merged)
    except ValidationError as exc:
        raise UsageError(f"--api-url {merged['api_url']!r} is not an http(s) URL") from exc
    try:
        tls_verification(client)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"--ca-file or MPIJC_CLIENT__CA_FILE: cannot load {client.ca_file}: {exc}") from exc
    return client


class Connection:
    """JSON reads of the API for one command: busy answers (429, 503 with ``Retry-After``, as the
    API gives while it reviews a caller's access across many namespaces) are asked again up to
    ``tries`` times, waiting what the API asks, at most ``max_pause_s`` each."""

    def __init__(
        self, client: ClientSettings, *, timeout_s: float = 30.0, tries: int = 4, max_pause_s: float = 5.0
    ) -> None:
        self.client = client
        self.base = client.api_url.rstrip("/")
        self.tries = tries
        self.max_pause_s = max_pause_s
        self._http = httpx.AsyncClient(timeout=timeout_s, verify=tls_verification(client))

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self._http.aclose()

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """The JSON answer of ``GET {api}{path}``; a :class:`~controller.client.errors.ClientError`
        when there is none to give."""
        for attempt in range(1, self.tries + 1):
            try:
                return await self._get(path, params)
            except Unreachable as exc:
                if exc.after is None or attempt == self.tries:
                    raise
                await asyncio.sleep(min(exc.after, self.max_pause_s))
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def events(
        self, path: str, params: Mapping[str, str], *, notice: NoticeCallback | None = None
    ) -> AsyncIterator[ServerSentEvent]:
        """The Server-Sent Events of ``GET {api}{path}`` for as long as the caller reads them.

        A lost or closed connection is reopened, after a pause that doubles from 0.5 s up to
        :data:`MAX_BACKOFF_S` (0.5 s again once events came; never shorter than the API's
        ``Retry-After``), with ``Last-Event-ID`` set to the last id received, and one line on
        ``notice`` (``lost the API …; reconnecting in N s``; without one, a warning logged on
        ``controller.client``). :class:`Refused` ends it, as
        does a ``denied`` event (the token was revoked or the caller's access removed meanwhile)."""
        url = f"{self.base}{path}"
        timeout = httpx.Timeout(10.0, read=READ_TIMEOUT_S)
        last_id: str | None = None
        backoff = 0.5
        while True:
            received = False
            try:
                headers = {**authorization(self.client), "Accept": "text/event-stream"}
                if last_id is not None:
                    headers["Last-Event-ID"] = last_id
                async with aconnect_sse(
                    self._http, "GET", url, params=params, headers=headers, timeout=timeout
                ) as source:
                    if source.response.status_code != 200:
                        await source.response.aread()
                        raise_for(source.response)
                    async for event in source.aiter_sse():
                        received = True
                        if event.event == "denied":  # the caller lost the right: asking again is refused
                            raise Refused(f"the API ended the stream: {_denied_reason(event.data)}")
                        if event.id:
                            last_id = event.id
                        yield event
                raise Unreachable("the API closed the stream")
            except (httpx.TransportError, SSEError, Unreachable) as exc:
                lost = exc if isinstance(exc, Unreachable) else Unreachable(_reason(exc))
                backoff = 0.5 if received else min(backoff * 2, MAX_BACKOFF_S)
                pause = max(backoff, lost.after or 0.0)
                (notice or log.warning)(f"lost the API ({lost}); reconnecting in {pause:.1f} s")
                await asyncio.sleep(pause)

    async def _get(self, path: str, params: dict[str, Any] | None) -> Any:
        url = f"{self.base}{path}"
        try:
            response = await self._http.get(url, params=params, headers=authorization(self.client))
        except httpx.TransportError as exc:
            raise Unreachable(f"cannot reach the API at {self.base}: {_reason(exc)}") from exc
        raise_for(response)
        try:
            return response.json()
        except ValueError as exc:
            raise Unreachable(
                f"the API at {self.base} answered {path} with something that is not JSON"
            ) from exc


def _denied_reason(data: str) -> str:
    try:
        reason = json.loads(data).get("reason")
    except (ValueError, AttributeError):
        reason = None
    return str(reason) if reason else "access denied"


def _reason(exc: httpx.TransportError) -> str:
    cause: BaseException = exc
    while cause.__cause__ is not None and not str(cause):
        cause = cause.__cause__
    text = " ".join(str(cause).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
