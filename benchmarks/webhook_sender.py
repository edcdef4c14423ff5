"""Webhook sender benchmark: CPU per request of the dispatcher's HTTP attempt against a bare send.

One process sends signed POSTs to one receiver process (:class:`controller.testing.receivers.Receiver`,
verifying nothing) on loopback, round ``--endpoints`` paths, ``--in-flight`` at once, each
endpoint through its own pool of two connections, in interleaved rounds of two kinds:

- **sender**: :meth:`consumers.notify.sending.WebhookSender.send`, as the dispatcher makes an
  attempt (SSRF guard, pinned address, ``Host`` header, whole-request deadline, signing, a
  bounded read of the answer; aiohttp since issue 40);
- **reference**: the webhooks benchmark's httpx reference send (``benchmarks.webhooks``): the
  signed headers and an ``httpx`` transport, nothing else (the dispatcher's client until issue 40);
- **aiohttp**: the same bare send through ``aiohttp`` (a session with a connector of two
  connections per endpoint): the client the dispatcher now uses, and what a client itself costs.

Both pay the same receiver and the same box; this process's CPU time per request of each round
is what is compared (the median of the per-round ratios), which a busy box distorts far less
than rates. No database and no bus: the pipeline's other costs are ``benchmarks.webhooks``'s.
Prints one JSON document and writes ``benchmarks/results/webhook_sender.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import ssl
import statistics
import time
from collections.abc import Awaitable, Callable
from multiprocessing.synchronize import Event

import aiohttp
import httpx

from benchmarks.harness import report
from consumers.notify.sending import EndpointTransports, WebhookSender
from controller.cli.collecting import pace_collector
from controller.contract.egress import EgressPolicy
from controller.contract.signing import generate_secret, signed_headers
from controller.testing.ports import free_port
from controller.testing.receivers import Receiver

CONNECTIONS = 2
BODY = (
    b'{"type":"job.succeeded","timestamp":"2026-11-28T12:00:00+00:00","data":{"job":'
    b'{"uid":"0f8fad5b-d9cb-469f-a165-70867728950e","namespace":"bench","name":"job-1"}}}'
)


def _serve(port: int, ready: Event) -> None:
    async def serve() -> None:
        async with Receiver(port=port):
            ready.set()
            await asyncio.Event().wait()

    asyncio.run(serve())


async def _rounds(port: int, args: argparse.Namespace) -> dict[str, list[float]]:
    secret = generate_secret()
    urls = [f"http://127.0.0.1:{port}/healthy/{n}" for n in range(args.endpoints)]
    slots = asyncio.Semaphore(args.in_flight)
    transports = EndpointTransports(CONNECTIONS)
    sender = WebhookSender(transports, EgressPolicy(["127.0.0.0/8"]), args.timeout_s)
    tls = ssl.create_default_context()
    pools = {
        url: httpx.AsyncHTTPTransport(verify=tls, limits=httpx.Limits(max_connections=CONNECTIONS))
        for url in urls
    }
    sessions = {
        url: aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=tls)) for url in urls
    }

    async def attempt(n: int) -> None:
        async with slots:
            done = await sender.send(str(n % len(urls)), urls[n % len(urls)], f"msg_{n}", BODY, [secret])
        if done.verdict != "delivered":
            raise RuntimeError(f"request {n}: {done}")

    async def bare(n: int) -> None:
        url = urls[n % len(urls)]
        headers = {"content-type": "application/json", **signed_headers([secret], f"ref_{n}", BODY)}
        async with slots:
            response = await pools[url].handle_async_request(
                httpx.Request("POST", url, content=BODY, headers=headers)
            )
            await response.aread()
            await response.aclose()

    async def light(n: int) -> None:
        url = urls[n % len(urls)]
        headers = {"content-type": "application/json", **signed_headers([secret], f"ref_{n}", BODY)}
        async with slots, sessions[url].post(url, data=BODY, headers=headers) as response:
            await response.read()

    kinds: dict[str, Callable[[int], Awaitable[None]]] = {
        "sender": attempt,
        "reference": bare,
        "aiohttp": light,
    }
    spent: dict[str, list[float]] = {kind: [] for kind in kinds}
    try:
        for _ in range(args.rounds):
            for kind, send in kinds.items():
                await asyncio.gather(*(send(n) for n in range(len(urls) * CONNECTIONS)))  # pools open
                started = time.process_time()
                await asyncio.gather(*(send(n) for n in range(args.requests)))
                spent[kind].append(round((time.process_time() - started) / args.requests * 1000, 4))
    finally:
        await transports.aclose()
        await asyncio.gather(*(pool.aclose() for pool in pools.values()))
        await asyncio.gather(*(session.close() for session in sessions.values()))
    return spent


def main(args: argparse.Namespace) -> None:
    pace_collector()  # as the dispatcher and the webhooks benchmark run
    port = free_port()
    spawn = multiprocessing.get_context("spawn")
    ready = spawn.Event()
    receiver = spawn.Process(target=_serve, args=(port, ready), daemon=True)
    receiver.start()
    try:
        if not ready.wait(60):
            raise RuntimeError("the receiver did not start")
        spent = asyncio.run(_rounds(port, args))
    finally:
        receiver.kill()
        receiver.join(10)
    ratios = [s / r for s, r in zip(spent["sender"], spent["reference"], strict=True)]
    lighter = [a / r for a, r in zip(spent["aiohttp"], spent["reference"], strict=True)]
    report(
        "webhook_sender",
        {
            "benchmark": "webhook_sender",
            "machine": f"this box, {os.cpu_count()} cores, the receiver in a process of its own",
            "requests_per_round": args.requests,
            "endpoints": args.endpoints,
            "in_flight": args.in_flight,
            "cpu_ms_per_request": spent,
            "median_cpu_ms_per_request": {kind: statistics.median(v) for kind, v in spent.items()},
            "median_ratio_sender_to_reference": round(statistics.median(ratios), 3),
            "median_ratio_aiohttp_to_reference": round(statistics.median(lighter), 3),
        },
    )


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds of each kind")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round")
    parser.add_argument("--endpoints", type=int, default=200, help="receiver paths, one pool each")
    parser.add_argument("--in-flight", type=int, default=128, help="requests in flight at once")
    parser.add_argument(
        "--timeout-s", type=float, default=60.0, help="the sender's request deadline (a busy box is slow)"
    )
    main(parser.parse_args())


if __name__ == "__main__":
    cli()
