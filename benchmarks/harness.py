"""Shared benchmark harness: the embedded services and consumer processes, as deployed.

Each consumer runs as its own ``mpijob-controller consume --only NAME`` process (history
scales out, rules is a single replica), the watcher side runs in the benchmark process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from sqlalchemy.ext.asyncio import AsyncEngine

from controller import migrate
from controller.bus import connect, ensure_streams
from controller.db import make_engine
from controller.embedded import EmbeddedServices, free_port
from controller.metrics import PipelineMetrics
from controller.settings import NatsSettings
from controller.subjects import Topology

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Bench:
    """Handles a benchmark works with."""

    nc: NATS
    js: JetStreamContext
    topology: Topology
    engine: AsyncEngine
    metrics: PipelineMetrics


@contextlib.asynccontextmanager
async def pipeline_services(data_dir: Path, consumers: Sequence[str] = ("history",)) -> AsyncIterator[Bench]:
    """Embedded PostgreSQL + NATS in ``data_dir``, migrated, streams declared, consumers running."""
    with EmbeddedServices(data_dir, free_port(), free_port(), None, None) as services:
        await migrate.upgrade_async(services.database_url)
        topology = Topology("bench")
        nc = await connect(services.nats_url, "bench")
        js = nc.jetstream()
        await ensure_streams(js, topology, NatsSettings())
        engine = make_engine(services.database_url)
        env = {
            **os.environ,
            "MPIJC_DATABASE__URL": services.database_url,
            "MPIJC_NATS__URL": services.nats_url,
            "MPIJC_NATS__PREFIX": topology.prefix,
            "MPIJC_LOG_LEVEL": "WARNING",
            "MPIJC_API__METRICS_PORT": "0",
        }
        processes = [
            subprocess.Popen(  # noqa: ASYNC220 - started once, before any measurement
                [sys.executable, "-m", "controller.cli", "consume", "--only", name], env=env, cwd=data_dir
            )
            for name in consumers
        ]
        for name in consumers:  # until each process has created its durable consumer
            for _ in range(300):
                with contextlib.suppress(NotFoundError):
                    await js.consumer_info(topology.stream("jobs"), topology.durable(name))
                    break
                await asyncio.sleep(0.1)
        try:
            yield Bench(nc, js, topology, engine, PipelineMetrics())
        finally:
            for process in processes:
                process.send_signal(signal.SIGTERM)
            for process in processes:
                process.wait(30)
            await engine.dispose()
            await nc.drain()


def report(name: str, result: dict[str, Any]) -> None:
    """Print the result as JSON and keep it in ``benchmarks/results/<name>.json``."""
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(result, indent=2) + "\n"
    (RESULTS / f"{name}.json").write_text(text)
    print(text, end="")
