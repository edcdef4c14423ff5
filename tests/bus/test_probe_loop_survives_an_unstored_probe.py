"""A progress probe the bus does not store within the door's retries is counted and dropped;
the watcher's probe loop goes on probing (a JOBS leader lost mid-run exited the watch process)."""

from __future__ import annotations

import asyncio

from controller.bus.publishing import Publisher
from controller.contract.events import LogProbed
from controller.contract.subjects import Topology
from controller.testing.events import log_probe
from controller.testing.waits import until
from tests.conftest import Stage
from watchers.service import probe_loop

UNPUBLISHED = "mpijc_unpublished_total"


async def test_probes_no_stream_stores_are_counted_and_probing_goes_on(stage: Stage) -> None:
    probed = 0

    async def probe() -> list[LogProbed]:
        nonlocal probed
        probed += 1
        return [log_probe(3)]

    nowhere = Publisher(
        stage.js, Topology(f"{stage.topology.prefix}nowhere"), retry_s=0.1
    )  # no stream takes it
    stop = asyncio.Event()
    loop = asyncio.create_task(probe_loop(probe, nowhere, stage.metrics, 0.01, stop))
    await until(lambda: stage.metrics.sample(UNPUBLISHED, type="log") >= 3 or loop.done(), 30)

    assert not loop.done()
    stop.set()
    await loop  # ends when told, without an error
    assert probed >= 3
    assert stage.metrics.sample("mpijc_published_total", type="log") == 0


async def test_stored_probes_are_counted_as_published(stage: Stage) -> None:
    async def probe() -> list[LogProbed]:
        return [log_probe(3)]

    stop = asyncio.Event()
    loop = asyncio.create_task(
        probe_loop(probe, Publisher(stage.js, stage.topology), stage.metrics, 0.01, stop)
    )
    await until(lambda: stage.metrics.sample("mpijc_published_total", type="log") >= 1 or loop.done(), 30)
    stop.set()
    await loop

    assert stage.metrics.sample(UNPUBLISHED, type="log") == 0
