"""A process stopping while its NATS server is gone closes its connection instead of failing:
nats-py refuses to drain a connection that is reconnecting, and one left open keeps reconnecting
and keeps the process from exiting (an ``api`` stopped during a NATS outage printed a traceback
and exited 1)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from controller.bus.streams import connect, disconnect
from controller.cli.embedded import EmbeddedNats
from controller.testing.ports import free_port


async def test_a_connection_reconnecting_to_a_stopped_server_is_closed(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "nats", free_port(), users=False)
    url = await asyncio.to_thread(server.start)
    try:
        nc = await connect(url, "mpijc-test")
    finally:
        await asyncio.to_thread(server.stop)
    for _ in range(100):  # until the client has noticed and is reconnecting
        if nc.is_reconnecting:
            break
        await asyncio.sleep(0.05)
    assert nc.is_reconnecting

    await asyncio.wait_for(disconnect(nc), 10)
    assert nc.is_closed


async def test_a_connected_one_is_drained(tmp_path: Path) -> None:
    server = EmbeddedNats(tmp_path / "nats", free_port(), users=False)
    url = await asyncio.to_thread(server.start)
    try:
        nc = await connect(url, "mpijc-test")
        received: list[bytes] = []

        async def keep(msg: object) -> None:
            received.append(msg.data)  # type: ignore[attr-defined]

        await nc.subscribe("drained", cb=keep)
        await nc.publish("drained", b"last")
        await disconnect(nc)
        assert nc.is_closed and received == [b"last"]  # delivered before the subscription ended
    finally:
        await asyncio.to_thread(server.stop)


class _Reconnecting:
    """A connection reconnecting to a server that is gone, closed as nats-py may close it."""

    is_closed = False
    is_connected = False
    options = {"name": "mpijc-test"}

    def __init__(self, close: Callable[[], Awaitable[None]]) -> None:
        self.close = close


async def test_a_close_whose_socket_waiter_nats_cancelled_is_a_close() -> None:
    """nats-py's own reconnect task, cancelled by ``close``, may cancel the old socket's close
    waiter that ``close`` then awaits: the CancelledError is not the caller's, and is not raised."""

    async def close() -> None:
        raise asyncio.CancelledError

    await disconnect(_Reconnecting(close))  # type: ignore[arg-type]


async def test_a_cancelled_caller_of_disconnect_is_still_cancelled() -> None:
    started = asyncio.Event()

    async def close() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(disconnect(_Reconnecting(close)))  # type: ignore[arg-type]
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
