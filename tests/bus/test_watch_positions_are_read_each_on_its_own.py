"""Where each watch stood is read key by key, all at once: a key the bus did not answer for makes
only its own watch list first, the others still resume from where they stood (one timeout used
to make every watch of a restart list 17,000 pods again)."""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NATS
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from controller.bus.positions import read_positions, save_positions
from controller.bus.versions import POSITIONS, open_published
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.testing.waits import until

STORED = {"pods": "120", "mpijobs": "118", "events": "121"}


async def test_a_position_not_answered_lists_only_its_own_watch(
    settings: Settings,
    topology: Topology,
    nats_client: NATS,
    js: JetStreamContext,  # the streams declared
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await open_published(js, topology, settings.nats)
    await save_positions(nats_client, topology, STORED)
    names = [*STORED, "nodes"]  # one never stored

    async def all_stored() -> bool:
        return await read_positions(nats_client, topology, settings.nats, names) == STORED

    await until(all_stored, timeout_s=10)
    get = KeyValue.get

    async def silent_for_pods(
        self: KeyValue, key: str, revision: int | None = None, validate_keys: bool = True
    ) -> KeyValue.Entry:
        if key == POSITIONS + "pods":
            raise NatsTimeoutError
        return await get(self, key, revision, validate_keys)

    monkeypatch.setattr(KeyValue, "get", silent_for_pods)
    read = await read_positions(nats_client, topology, settings.nats, names)
    assert read == {"mpijobs": "118", "events": "121"}
    assert "1 of 4 watch positions not read" in caplog.text
