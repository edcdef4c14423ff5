"""API exhaustion benchmark: what unauthenticated (and cheap authenticated) clients cost the API.

The API runs as ``mpijob-controller api`` serves it (:func:`controller.cli.runtime.serve_api`,
static tokens, a database nobody answers: every probe is answered before a route needs one)
in a process of its own, whose resident memory and CPU seconds are read from ``/proc``.
The probes, from this process over loopback:

- **stalled uploads**: ``--uploads`` connections each declare a body of the limit less one
  byte, send all of it but the last byte, and stall; without a token, then with one. Memory
  while they are held and once the body deadline passed, and how many are still open.
- **unfinished headers**: ``--idle`` connections each send half a request head and stall;
  memory, and how many are open after the header deadline.
- **bodies**: CPU per request of 1 MiB JSON bodies (a flat list, and one 100,000 arrays deep)
  without a token, and of a flat list at the body limit with one; and ``/healthz`` latency
  while four clients send the unauthenticated ones back to back.

Settings come from the environment (``MPIJC_API__MAX_BODY_BYTES=1048576`` measures the gate
at the old limit). Run it in a checkout of another commit (same file copied there) to
compare; prints one JSON document and writes it to ``benchmarks/results/api_exhaustion.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from benchmarks.harness import Connection, ServedProcess, held_past_deadline, report
from controller.contract.settings import Settings
from controller.testing.ports import free_port

MIB = 1 << 20
TOKEN = "token-bench"
NOWHERE = "postgresql://nobody@127.0.0.1:1/none"


# --------------------------------------------------------------------------- the server


def serve(port: int) -> None:
    """The API, as ``mpijob-controller api`` serves it, without the bus and the database."""
    from controller.cli.runtime import Runtime, serve_api
    from controller.contract.settings import Settings
    from controller.contract.subjects import Topology
    from controller.metrics import PipelineMetrics
    from controller.store.engine import make_engine

    class NoBus(Runtime):
        @property
        def js(self) -> Any:
            return None  # /metrics is not scraped here

    settings = Settings()
    rt = NoBus(settings, Topology("bench"), PipelineMetrics(), _engine=make_engine(NOWHERE))
    print("serving", port, flush=True)
    asyncio.run(serve_api(cast(Runtime, rt), asyncio.Event()))


class Server(ServedProcess):
    """The API process: its address, memory and CPU."""

    def __init__(self) -> None:
        port = free_port()
        env = {
            "MPIJC_API__PORT": str(port),
            "MPIJC_METRICS__PORT": str(free_port()),
            "MPIJC_API__AUTH": "static",
            "MPIJC_API__TOKENS": json.dumps(
                {TOKEN: {"username": "bench", "namespaces": ["*"], "manage": ["*"]}}
            ),
            "MPIJC_API__AUTH_FAILURE_RATE_PER_S": "0",  # the probes measure cost, not the rate limits
            "MPIJC_API__RATE_PER_S": "0",
            "MPIJC_API__MAX_CONNECTIONS_PER_ADDRESS": "100000",  # one address: its cost is measured
            "MPIJC_LOG_LEVEL": "WARNING",
        }
        super().__init__(port, ["-m", "benchmarks.api_exhaustion", "--serve", str(port)], env, "the API")


# --------------------------------------------------------------------------- the probes


async def open_many(port: int, count: int, data: bytes) -> list[Connection]:
    """``count`` connections that each sent ``data`` (and nothing more)."""
    connections = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(data)
        connections.append((reader, writer))
    await asyncio.gather(*(_drained(writer) for _, writer in connections))
    return connections


async def _drained(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):  # answered and closed before it was all sent
        await writer.drain()


async def held_and_dropped(server: Server, count: int, data: bytes, deadline_s: float) -> dict[str, Any]:
    return await held_past_deadline(
        server, count, lambda: open_many(server.port, count, data), deadline_s, deadline_s + 1.0
    )


def upload(length: int, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (
        f"POST /api/v1/webhooks HTTP/1.1\r\nHost: api\r\n{auth}Content-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    return head.encode() + b"[" + b"1," * ((length - 2) // 2)


async def request(port: int, data: bytes) -> tuple[str, float]:
    """Send ``data``, read the answer to its end; its status ("reset" if the server reset the
    connection before an answer could be read) and the seconds it took."""
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    answer = b""
    with contextlib.suppress(ConnectionError):  # answered and closed before the body was sent whole
        await writer.drain()
    with contextlib.suppress(ConnectionError):
        while chunk := await reader.read(65536):
            answer += chunk
    writer.close()
    status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/") else "reset"
    return status, time.perf_counter() - start


def post(body: bytes, token: str | None) -> bytes:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (
        f"POST /api/v1/webhooks HTTP/1.1\r\nHost: api\r\nConnection: close\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


HEALTH = b"GET /healthz HTTP/1.1\r\nHost: api\r\nConnection: close\r\n\r\n"


async def cpu_per_request(server: Server, data: bytes, repeat: int) -> dict[str, Any]:
    statuses = set()
    start = server.cpu_s()
    for _ in range(repeat):
        status, _ = await request(server.port, data)
        statuses.add(status)
    return {"status": sorted(statuses), "cpu_ms": round((server.cpu_s() - start) / repeat * 1000, 2)}


async def healthz_under(server: Server, data: bytes, clients: int, rounds: int) -> dict[str, float]:
    stop = asyncio.Event()

    async def attacker() -> None:
        while not stop.is_set():
            await request(server.port, data)

    attackers = [asyncio.create_task(attacker()) for _ in range(clients)]
    await asyncio.sleep(0.5)
    latencies = [(await request(server.port, HEALTH))[1] for _ in range(rounds)]
    stop.set()
    await asyncio.gather(*attackers)
    return {
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
    }


async def measure(uploads: int, idle: int, repeat: int) -> dict[str, Any]:
    api = Settings().api  # as the server reads them (MPIJC_API__…)
    limit = api.max_body_bytes
    body_deadline = float(getattr(api, "body_timeout_s", 30.0))
    header_deadline = float(getattr(api, "header_timeout_s", 10.0))
    flat_mib = b"[" + b"1," * (MIB // 2 - 2) + b"1]"
    deep_mib = b"[" * (MIB // 2) + b"]" * (MIB // 2)
    flat_limit = b"[" + b"1," * (limit // 2 - 2) + b"1]"
    probes: dict[str, Callable[[Server], Awaitable[Any]]] = {
        "bodies": lambda server: bodies(server, repeat, flat_mib, deep_mib, flat_limit),
        "stalled_uploads_no_token": lambda server: held_and_dropped(
            server, uploads, upload(limit - 1, None), body_deadline
        ),
        "stalled_uploads_with_token": lambda server: held_and_dropped(
            server, uploads, upload(limit - 1, TOKEN), body_deadline
        ),
        "unfinished_headers": lambda server: held_and_dropped(
            server, idle, b"GET /healthz HTTP/1.1\r\nHost: api\r\nX-Slow: ", header_deadline
        ),
    }
    result: dict[str, Any] = {
        "settings": {
            "max_body_bytes": limit,
            "body_timeout_s": getattr(api, "body_timeout_s", None),
            "header_timeout_s": getattr(api, "header_timeout_s", None),
            "max_connections": getattr(api, "max_connections", None),
        }
    }
    for name, probe in probes.items():
        # a new API process for each probe: memory a probe took is not handed back to the system
        async with Server() as server:
            result[name] = await probe(server)
            result[name]["rss_peak_mib"] = server.peak_rss_mib()
    return result


async def bodies(
    server: Server, repeat: int, flat_mib: bytes, deep_mib: bytes, flat_limit: bytes
) -> dict[str, Any]:
    return {
        "rss_idle_mib": server.rss_mib(),
        "1_mib_flat_list_no_token": await cpu_per_request(server, post(flat_mib, None), repeat),
        "1_mib_deep_no_token": await cpu_per_request(server, post(deep_mib, None), repeat),
        "flat_list_at_the_limit_with_token": await cpu_per_request(server, post(flat_limit, TOKEN), repeat),
        "healthz_alone": await healthz_under(server, HEALTH, 0, 20),
        "healthz_under_4_clients_1_mib_no_token": await healthz_under(server, post(flat_mib, None), 4, 20),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--uploads", type=int, default=300, help="stalled uploads held at once")
    parser.add_argument("--idle", type=int, default=1000, help="connections with unfinished headers")
    parser.add_argument("--repeat", type=int, default=10, help="requests per body shape")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    report("api_exhaustion", asyncio.run(measure(args.uploads, args.idle, args.repeat)))


if __name__ == "__main__":
    main()
