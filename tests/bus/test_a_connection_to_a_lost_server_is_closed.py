"""A process stopping while its NATS server is gone closes its connection instead of failing:
nats-py refuses to drain a connection that is reconnecting, and one left open keeps reconnecting
and keeps the process from exiting (an ``api`` stopped during a NATS outage printed a traceback
and exited 1)."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
