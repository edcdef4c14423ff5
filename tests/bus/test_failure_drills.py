"""Failure drills on real NATS and PostgreSQL, each in the middle of a burst of job stories:
SIGKILL of one of two consumer processes (every role runs in both), and a PostgreSQL restart.
Each time every event is in the history, every finding is published once, and every expected
webhook is delivered under one id. (Losing a NATS server: test_nats_cluster_survives_a_lost_server.)
The benchmark ``benchmarks.drills`` times the recovery of the same drills."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from pathlib import Path

import pytest
from nats.js import JetStreamContext

from controller.cli.embedded import EmbeddedPostgres
from controller.contract.settings import DatabaseSettings, Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from controller.store.migrate import upgrade_async
from controller.testing.drills import drilling
from controller.testing.ports import free_port
from tests.conftest import Stage

pytestmark = pytest.mark.slow

JOBS = 40


async def test_a_consumer_process_killed_mid_burst_loses_and_repeats_nothing(
    stage: Stage,
    tmp_path: Path,
) -> None:
    async with drilling(
        stage.settings, stage.topology, stage.js, stage.engine, stage.metrics, tmp_path
    ) as drill:
        doomed, survivor = drill.start("doomed"), drill.start("survivor")
        try:
            await drill.running("doomed")
            await drill.running("survivor")

            async def kill() -> None:
                doomed.send_signal(signal.SIGKILL)  # with batches, leases and deliveries in hand
                doomed.wait(10)

            burst = await drill.burst(JOBS, kill)
            survived = survivor.poll() is None
        finally:
            codes = drill.stop()

    assert survived and codes["survivor"] == 0, drill.log("survivor").read_text()[-3000:]
    assert codes["doomed"] == -signal.SIGKILL
    assert burst.outcome.complete, burst.outcome


async def test_a_postgresql_restart_mid_burst_loses_and_repeats_nothing(
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    metrics: PipelineMetrics,
    tmp_path: Path,
) -> None:
    postgres = EmbeddedPostgres(tmp_path / "postgres", free_port())
    url = postgres.start()
    try:
        await upgrade_async(url)
        settings.database = DatabaseSettings(url=url, single_role=True)  # type: ignore[arg-type]
        engine = make_engine(url)
        async with drilling(settings, topology, js, engine, metrics, tmp_path) as drill:
            consumers = drill.start("consumers")
            try:
                await drill.running("consumers")

                async def start_again() -> None:
                    await asyncio.sleep(2)
                    await asyncio.to_thread(postgres.start)

                async def restart() -> Awaitable[None]:
                    await asyncio.to_thread(postgres.stop)  # batches fail and are redelivered
                    return start_again()

                burst = await drill.burst(JOBS, restart)
                survived = consumers.poll() is None
            finally:
                codes = drill.stop()
        await engine.dispose()
    finally:
        postgres.stop()

    assert survived and codes == {"consumers": 0}, drill.log("consumers").read_text()[-3000:]
    assert burst.outcome.complete, burst.outcome
