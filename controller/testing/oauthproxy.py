"""A stand-in for OpenShift's ``oauth-proxy`` in front of the API, for tests: no oauth-proxy binary
can be installed here (it is a Go program shipped as an OpenShift image), so this is a reverse
proxy of its own, a separate process over real sockets, doing to each request what oauth-proxy's
``Authenticate`` (``oauthproxy.go`` in openshift/oauth-proxy) does as the OpenShift overlay runs it
(``--pass-access-token --pass-basic-auth=false``, no ``--openshift-delegate-urls``, no
``--skip-auth-regex``, no htpasswd file):

- ``/oauth/healthz`` answers ``OK`` (its ping path);
- a request without a session (the ``_oauth_proxy`` cookie) is not passed on: 403 and a sign-in
  page (oauth-proxy's ``SignInPage``), whatever headers it carries;
- a request with one is passed on with the session's access token in ``X-Forwarded-Access-Token``
  (replacing any the client sent), the user in ``X-Forwarded-User``, the client appended to
  ``X-Forwarded-For`` (Go's reverse proxy does), ``Host`` kept (``--pass-host-header``), hop-by-hop
  headers dropped, and the answer streamed back as it comes (oauth-proxy flushes every 5 ms, so
  event streams pass).

The OAuth sign-in itself (the code flow with OpenShift's OAuth server) is not played: sessions are
given in a JSON file, ``{"<cookie value>": {"user": "...", "token": "..."}}``. Run it as
``python -m controller.testing.oauthproxy --port P --upstream http://127.0.0.1:Q --sessions FILE``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from http.cookies import SimpleCookie
from pathlib import Path

import httpx
import uvicorn
from starlette.types import Receive, Scope, Send

__all__ = ["COOKIE", "OAuthProxyStandIn", "main"]

COOKIE = "_oauth_proxy"
"""oauth-proxy's session cookie (``--cookie-name``'s default)."""
PING = "/oauth/healthz"
"""oauth-proxy's ping path (``--proxy-prefix`` + ``/healthz``)."""
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer"}
    | {"transfer-encoding", "upgrade", "content-length"}
)
_SET_BY_PROXY = frozenset({"x-forwarded-access-token", "x-forwarded-user", "x-forwarded-for"})

Headers = list[tuple[bytes, bytes]]


class OAuthProxyStandIn:
    """ASGI: the proxy in front of ``upstream`` for the signed-in ``sessions`` (cookie value →
    ``{"user", "token"}``)."""

    def __init__(self, upstream: str, sessions: Mapping[str, Mapping[str, str]]) -> None:
        self._upstream = upstream.rstrip("/")
        self._sessions = sessions
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=5.0))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] == PING:
            await _answer(send, 200, b"OK")
            return
        headers: Headers = list(scope["headers"])
        session = self._sessions.get(_cookie(headers) or "")
        if session is None:
            await _answer(send, 403, b"<!DOCTYPE html><title>Sign In</title><p>Sign in with OpenShift")
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        forwarded_for = ", ".join(
            [
                *(v.decode("latin-1") for k, v in headers if k.lower() == b"x-forwarded-for"),
                scope["client"][0],
            ]
        )
        passed = [(k, v) for k, v in headers if k.lower().decode() not in _HOP_BY_HOP | _SET_BY_PROXY]
        passed += [
            (b"x-forwarded-for", forwarded_for.encode()),
            (b"x-forwarded-user", session["user"].encode()),
            (b"x-forwarded-access-token", session["token"].encode()),
        ]
        target = scope["raw_path"].decode("latin-1")
        if scope["query_string"]:
            target += "?" + scope["query_string"].decode("latin-1")
        request = self._client.build_request(
            scope["method"], self._upstream + target, headers=passed, content=body
        )
        response = await self._client.send(request, stream=True)
        try:
            kept = [(k, v) for k, v in response.headers.raw if k.lower().decode() not in _HOP_BY_HOP]
            await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


def _cookie(headers: Headers) -> str | None:
    """The session cookie's value among ``headers``, if any."""
    for key, value in headers:
        if key.lower() == b"cookie":
            morsel = SimpleCookie(value.decode("latin-1")).get(COOKIE)
            if morsel is not None:
                return morsel.value
    return None


async def _answer(send: Send, status: int, body: bytes) -> None:
    """A whole small answer of the proxy's own."""
    content_type = b"text/plain" if status == 200 else b"text/html; charset=utf-8"
    await send(
        {"type": "http.response.start", "status": status, "headers": [(b"content-type", content_type)]}
    )
    await send({"type": "http.response.body", "body": body})


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the stand-in on 127.0.0.1 until stopped."""
    parser = argparse.ArgumentParser(prog="python -m controller.testing.oauthproxy")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--upstream", required=True, help="the API's loopback listener, http://127.0.0.1:PORT"
    )
    parser.add_argument("--sessions", type=Path, required=True, help="JSON: cookie value → user and token")
    args = parser.parse_args(argv)
    sessions = json.loads(args.sessions.read_text())
    proxy = OAuthProxyStandIn(args.upstream, sessions)
    uvicorn.run(  # the peer is the client, as for oauth-proxy: no X-Forwarded-For read
        proxy, host="127.0.0.1", port=args.port, log_level="warning", lifespan="off", proxy_headers=False
    )


if __name__ == "__main__":
    main()
