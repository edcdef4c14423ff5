"""No unauthenticated exhaustion: the API's server, as ``mpijob-controller api`` runs it (uvicorn
configured by :func:`controller.api.server.server_config`, on a loopback port), drops stalled
uploads and unfinished headers at their deadlines, refuses an unauthenticated body before it
has arrived, answers 503 beyond its connection cap, and keys per-client limits on the
X-Forwarded-For address only behind a trusted proxy.

No database is needed: everything here is answered before a route touches one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pydantic
import pytest
import uvicorn

from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.limits import ApiLimits
from controller.api.server import HeaderDeadline, server_config
from controller.contract.settings import ApiSettings, Settings
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from controller.testing.ports import free_port
from controller.testing.waits import until
from tests.api_fixtures import USERS, CountingAccess, bearer

NOWHERE = "postgresql://nobody@127.0.0.1:1/none"
GUARD_S = 10.0
"""Longest any exchange here may take before the test fails (deadlines here are under 1 s)."""
MIB = 1 << 20
ATTACKER = "127.0.0.2"
"""Another loopback address (all of 127.0.0.0/8 is loopback on Linux): a client of its own."""


@contextlib.asynccontextmanager
async def serving(
    settings: ApiSettings, reviewer: StaticAccess | None = None
) -> AsyncIterator[uvicorn.Server]:
    """The API under ``settings`` served by uvicorn on a free loopback port."""
    app = create_app(
        make_engine(NOWHERE),
        PipelineMetrics(),
        reviewer or StaticAccess(USERS),
        limits=ApiLimits.from_settings(settings),
    )
    server = uvicorn.Server(server_config(app, settings, free_port()))
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started or task.done(), what=lambda: "uvicorn did not start")
    try:
        yield server
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, GUARD_S)


def port_of(server: uvicorn.Server) -> int:
    return server.config.port


async def connect(server: uvicorn.Server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port_of(server))


async def exchange(server: uvicorn.Server, request: bytes) -> bytes:
    """Send ``request`` (possibly unfinished) on a new connection; everything the server sends
    until it closes the connection."""
    reader, writer = await connect(server)
    writer.write(request)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), GUARD_S)
    finally:
        writer.close()


async def one_response(reader: asyncio.StreamReader) -> bytes:
    """The head of one response on a kept-alive connection (bodies here are short JSON)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), GUARD_S)
    length = next(
        int(line.split(b":")[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    await asyncio.wait_for(reader.readexactly(length), GUARD_S)
    return head


HEALTH = b"GET /healthz HTTP/1.1\r\nHost: api\r\n\r\n"


# --------------------------------------------------------------------------- deadlines


async def test_a_stalled_upload_is_answered_408_and_dropped_after_the_body_deadline() -> None:
    async with serving(ApiSettings(tokens=USERS, body_timeout_s=0.3)) as server:
        answer = await exchange(
            server,
            b"POST /api/v1/webhooks HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer token-admin\r\n"
            b"Content-Type: application/json\r\nContent-Length: 60000\r\n\r\n" + b'{"url": "http://',
        )
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"did not arrive within 0.3 s" in answer
        healthy = await exchange(server, HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        assert healthy.startswith(b"HTTP/1.1 200 ")


async def test_unfinished_headers_are_dropped_after_the_header_deadline() -> None:
    async with serving(
        ApiSettings(first_header_timeout_s=0.3, header_timeout_s=0.3, keep_alive_s=60)
    ) as server:
        assert await exchange(server, b"GET /healthz HTTP/1.1\r\nHost: api\r\n") == b"", "closed, unanswered"

        # after a response, the next request's head has the same deadline (uvicorn's keep-alive
        # timer stops at the first byte of it)
        reader, writer = await connect(server)
        try:
            writer.write(HEALTH)
            assert (await one_response(reader)).startswith(b"HTTP/1.1 200 ")
            writer.write(b"GET /healthz HTTP/1.1\r\n")
            assert await asyncio.wait_for(reader.read(), GUARD_S) == b""
        finally:
            writer.close()


# --------------------------------------------------------------------------- bodies


async def test_an_unauthenticated_1_mib_body_is_refused_before_it_has_arrived() -> None:
    """The 401 comes back while 1 KiB of the declared 1 MiB is sent: the body was never read,
    so never parsed."""
    reviewer = CountingAccess()
    async with serving(ApiSettings(tokens=USERS, max_body_bytes=2 * MIB), reviewer) as server:
        answer = await exchange(
            server,
            b"POST /api/v1/webhooks HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer guessed\r\n"
            + f"Content-Type: application/json\r\nContent-Length: {MIB}\r\n\r\n".encode()
            + b"["
            + b"1," * 512,
        )
    assert answer.startswith(b"HTTP/1.1 401 "), answer
    assert b"www-authenticate: Bearer" in answer
    assert reviewer.reviews == 1


async def test_a_body_of_too_many_items_is_413_before_it_is_parsed_and_a_subscription_fits() -> None:
    async with (
        serving(ApiSettings(tokens=USERS)) as server,
        httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port_of(server)}", headers=bearer("token-admin")
        ) as api,
    ):
        flat = await api.post("/api/v1/webhooks", content=b"[" + b"1," * 20_000 + b"1]")
        deep = await api.post("/api/v1/webhooks", content=b"[" * 100 + b"]" * 100)
        largest = {
            "channel": "email",
            "recipients": [f"{i:03}" + "a" * 240 + "@example.org" for i in range(50)],
            "event_types": [f"job.type{i}" for i in range(16)],
            "rules": [f"rule{i}" for i in range(32)],
            "label_selector": ",".join(f"k{i}=v" for i in range(32)),
        }
        fits = await api.post("/api/v1/webhooks", json=largest)
    assert flat.status_code == 413 and "20001 items" in flat.json()["detail"]
    assert deep.status_code == 413 and "100 arrays and objects" in deep.json()["detail"]
    assert fits.status_code == 422, "the largest subscription is within the budget: it reaches validation"


# --------------------------------------------------------------------------- connections


async def test_connections_beyond_the_cap_are_answered_503() -> None:
    async with serving(ApiSettings(max_connections=2, keep_alive_s=60)) as server:
        held = [await connect(server) for _ in range(2)]
        try:
            for reader, writer in held:
                writer.write(HEALTH)
                assert (await one_response(reader)).startswith(b"HTTP/1.1 200 ")

            assert (await exchange(server, HEALTH)).startswith(b"HTTP/1.1 503 ")

            held[0][1].close()
            await until(lambda: len(server.server_state.connections) < 2)
            again = await exchange(server, HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
            assert again.startswith(b"HTTP/1.1 200 "), "a freed slot serves again"
        finally:
            for _, writer in held:
                writer.close()


async def test_250_half_open_connections_from_one_address_leave_every_other_client_served() -> None:
    """The probe, under the shipped settings: one address opens 250 connections and sends half a
    request line on each; another address's valid requests are all served meanwhile (they were
    52 of 52 answered 503 when the cap counted the attacker's connections as anyone's)."""
    api = ApiSettings()
    async with serving(api) as server:
        attacker = []
        try:
            for _ in range(250):
                reader, writer = await asyncio.open_connection(
                    "127.0.0.1", port_of(server), local_addr=(ATTACKER, 0)
                )
                writer.write(b"GET /healthz HTTP/1.1\r\n")
                attacker.append((reader, writer))
            answers = [
                await exchange(server, HEALTH.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
                for _ in range(52)
            ]
            refused = await asyncio.wait_for(attacker[-1][0].read(), GUARD_S)
            shares = getattr(server.config.http, "shares", None)
            held = shares.connections(ATTACKER) if shares is not None else len(attacker)
        finally:
            for _, writer in attacker:
                writer.close()
    assert [a[:12] for a in answers] == [b"HTTP/1.1 200"] * 52
    assert held <= api.max_connections_per_address
    assert refused.startswith(b"HTTP/1.1 429 "), refused
    assert b"holds 32 connections, the most one client may" in refused


async def test_a_new_connection_has_a_short_deadline_for_its_first_head() -> None:
    async with serving(ApiSettings(first_header_timeout_s=0.3, header_timeout_s=60)) as server:
        assert await exchange(server, b"GET /healthz HTTP/1.1\r\nHost: api\r\n") == b"", "closed, unanswered"


async def test_behind_a_trusted_proxy_each_forwarded_client_has_its_share_of_requests() -> None:
    """The proxy's own address holds every connection and is not capped; what one forwarded
    client has in flight is: a third stalled upload of 203.0.113.9 is 429, another client's
    request is served."""
    settings = ApiSettings(tokens=USERS, forwarded_allow_ips=["127.0.0.0/8"], max_connections_per_address=2)
    stalled = (
        b"POST /api/v1/webhooks HTTP/1.1\r\nHost: api\r\nAuthorization: Bearer token-admin\r\n"
        b"X-Forwarded-For: 203.0.113.9\r\nContent-Type: application/json\r\nContent-Length: 600\r\n\r\n{"
    )
    async with serving(settings) as server:
        held = [await connect(server) for _ in range(2)]
        try:
            for _, writer in held:
                writer.write(stalled)
            shares = server.config.http.shares  # type: ignore[union-attr]
            await until(lambda: shares.requests("203.0.113.9") == 2, GUARD_S)
            third = await exchange(server, stalled)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_of(server)}") as api:
                other = await api.get("/healthz", headers={"X-Forwarded-For": "203.0.113.10"})
                same = await api.get("/healthz", headers={"X-Forwarded-For": "203.0.113.9"})
            # the proxy's connections count until their first head: a trusted address (a pod of a
            # trusted network) holding half-open connections is bounded like any other
            held += [await connect(server) for _ in range(2)]
            for _, writer in held[2:]:
                writer.write(b"GET /healthz HTTP/1.1\r\n")
            half_open = await exchange(server, b"GET /healthz HTTP/1.1\r\n")
        finally:
            for _, writer in held:
                writer.close()
    assert half_open.startswith(b"HTTP/1.1 429 "), half_open
    assert third.startswith(b"HTTP/1.1 429 "), third
    assert b"203.0.113.9 holds 2 requests in flight" in third
    assert (other.status_code, same.status_code) == (200, 429)
    assert same.headers["retry-after"] == "1"


# --------------------------------------------------------------------------- client addresses

ONE_FAILURE = {"auth_failure_rate_per_s": 0.001, "auth_failure_burst": 1}
"""Each address may fail once; the bucket refills too slowly to matter within a test."""


async def failures_from(server: uvicorn.Server, forwarded: list[str]) -> list[int]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_of(server)}") as api:
        return [
            (
                await api.get("/api/v1/runs", headers={**bearer("guessed"), "X-Forwarded-For": client})
            ).status_code
            for client in forwarded
        ]


async def test_behind_a_trusted_proxy_the_forwarded_address_is_the_limiters_key() -> None:
    settings = ApiSettings(tokens=USERS, forwarded_allow_ips=["127.0.0.0/8"], **ONE_FAILURE)
    async with serving(settings) as server:
        answers = await failures_from(server, ["203.0.113.1", "203.0.113.1", "203.0.113.2"])
    assert answers == [401, 429, 401], "each client behind the proxy has its own failure bucket"


async def test_from_an_untrusted_peer_the_forwarded_address_is_ignored() -> None:
    async with serving(ApiSettings(tokens=USERS, **ONE_FAILURE)) as server:
        answers = await failures_from(server, ["203.0.113.1", "203.0.113.2"])
    assert answers == [401, 429], "the peer's own address is the key: a forged header changes nothing"


def test_a_proxy_is_named_by_address_never_by_wildcard() -> None:
    with pytest.raises(pydantic.ValidationError, match="not an IP address or network"):
        ApiSettings(forwarded_allow_ips=["*"])


def test_the_server_takes_its_bounds_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "MPIJC_API__FORWARDED_ALLOW_IPS": '["10.128.0.0/14", "192.0.2.7"]',
        "MPIJC_API__MAX_CONNECTIONS": "50",
        "MPIJC_API__KEEP_ALIVE_S": "3",
        "MPIJC_API__MAX_HEADER_BYTES": "8192",
        "MPIJC_API__HEADER_TIMEOUT_S": "2.5",
        "MPIJC_API__FIRST_HEADER_TIMEOUT_S": "1.5",
        "MPIJC_API__MAX_CONNECTIONS_PER_ADDRESS": "8",
    }.items():
        monkeypatch.setenv(name, value)
    api = Settings(_env_file=None).api  # type: ignore[call-arg]
    config = server_config(object(), api, 8480)

    assert config.forwarded_allow_ips == ["10.128.0.0/14", "192.0.2.7"] and config.proxy_headers
    assert config.limit_concurrency == 51, (
        "uvicorn counts the asking connection: 50 served, the 51st gets 503"
    )
    assert (config.timeout_keep_alive, config.h11_max_incomplete_event_size) == (3, 8192)
    assert isinstance(config.http, type) and issubclass(config.http, HeaderDeadline)
    assert (config.http.header_timeout_s, config.http.first_header_timeout_s) == (2.5, 1.5)
    assert config.http.shares is not None and config.http.shares.per_address == 8
    assert server_config(object(), ApiSettings(), 9464, capped=False).limit_concurrency is None
    assert not server_config(object(), ApiSettings(), 8480).proxy_headers, "nobody trusted by default"
