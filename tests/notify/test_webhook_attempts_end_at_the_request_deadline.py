"""One attempt ends at the whole-request deadline wherever the endpoint stalls: before answering
at all, after the status line, or in the middle of a long answer; the attempt is retried and the
pool keeps serving the endpoint's next request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from consumers.notify.sending import EndpointTransports, WebhookSender
from controller.contract.egress import EgressPolicy
from controller.contract.signing import generate_secret

TIMEOUT_S = 0.5
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    await asyncio.Event().wait()  # never answers


async def _status_only(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\n")
    await writer.drain()
    await asyncio.Event().wait()


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _request(reader)
    writer.write(b"HTTP/1.1 500 Oops\r\ncontent-length: 100000\r\n\r\n")
    while True:  # a byte at a time, never reaching the end of the answer
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(0.05)


async def _ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            await _request(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()


@asynccontextmanager
async def _server(handler: Handler) -> AsyncIterator[str]:
    handlers: set[asyncio.Task[None]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handlers.add(task := asyncio.current_task())  # type: ignore[arg-type]
        try:
            await handler(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client gave up on the connection
        finally:
            writer.close()
            handlers.discard(task)  # type: ignore[arg-type]

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        server.close()
        for task in list(handlers):
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()


@pytest.mark.parametrize("stall", [_silent, _status_only, _trickle], ids=["silent", "status-only", "trickle"])
async def test_a_stalled_attempt_times_out_and_is_retried(stall: Handler) -> None:
    transports = EndpointTransports(connections=1)
    sender = WebhookSender(transports, EgressPolicy(["127.0.0.0/8"]), TIMEOUT_S)
    try:
        async with _server(stall) as url:
            attempt = await asyncio.wait_for(
                sender.send("sub", url, "msg_1", b"{}", [generate_secret()]), timeout=30
            )
        assert attempt.verdict == "retry"
        assert attempt.error == f"timed out after {TIMEOUT_S:g} s"
        assert attempt.latency_s >= TIMEOUT_S
        async with _server(_ok) as url:  # the same endpoint's pool is usable again
            for n in range(2):
                after = await asyncio.wait_for(
                    sender.send("sub", url, f"msg_{n + 2}", b"{}", [generate_secret()]), timeout=30
                )
                assert (after.verdict, after.status_code) == ("delivered", 204)
    finally:
        await transports.aclose()
