"""A real Prometheus scraping a usage exporter (:func:`served`) or one whose series follow curves in
time (:func:`curves`), and a run of simulated pods for them to describe."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest
from prometheus_client import CollectorRegistry

from controller.contract.events import BusEvent
from controller.contract.settings import UsageSettings
from controller.kube.resources import MPI_PODS
from controller.prometheus import PrometheusReader
from controller.testing.curves import CurveExporter
from controller.testing.objects import mpijob, pod, with_conditions
from controller.testing.prometheus import Prometheus, UsageExporter, prometheus_binary
from watchers.correlating import Correlator, Observation
from watchers.metrics import UsageMetrics
from watchers.usage import UsageProbe
from watchers.watching import WatchChange

Obj = dict[str, Any]


Exporter = TypeVar("Exporter", bound=UsageExporter)


@dataclass
class Served(Generic[Exporter]):
    """The exporter the test sets series on and the Prometheus scraping it every second."""

    exporter: Exporter
    prometheus: Prometheus


Curves = Served[CurveExporter]
"""An exporter whose series follow curves in time (a leak, a sawtooth, a straggler's utilization)."""


@contextlib.asynccontextmanager
async def scraped(exporter: Exporter, directory: Path) -> AsyncIterator[Served[Exporter]]:
    """``exporter`` started and a real Prometheus (its data in ``directory``) scraping it; the test
    is skipped where no Prometheus is installed."""
    binary, why = prometheus_binary()
    if binary is None:
        pytest.skip(why)
    exporter.start()
    prometheus = Prometheus(binary, directory, [f"127.0.0.1:{exporter.port}"])
    await prometheus.start()
    try:
        yield Served(exporter, prometheus)
    finally:
        await prometheus.stop()
        exporter.stop()


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served[UsageExporter]]:
    async with scraped(UsageExporter(), tmp_path / "prometheus") as found:
        yield found


@pytest.fixture
async def curves(tmp_path: Path) -> AsyncIterator[Curves]:
    async with scraped(CurveExporter(), tmp_path / "prometheus") as found:
        yield found


def usage_settings(url: str, **overrides: Any) -> UsageSettings:
    """Settings for a Prometheus scraping every second: one-second steps, a minute's window."""
    return UsageSettings(
        url=url, step_s=1, scrape_interval_s=1, window_s=60, retries=1, retry_backoff_s=0.01, **overrides
    )


def iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Run:
    """One MPIJob and its pods, as the watcher saw them, and the bus events they made."""

    job: Obj
    pods: dict[str, Obj]
    events: list[BusEvent]


def running_job(
    correlator: Correlator,
    name: str,
    namespace: str,
    workers: int,
    memory: str = "16Gi",
    started: datetime | None = None,
) -> Run:
    """A Running MPIJob with a running launcher and ``workers`` running workers, told to ``correlator``."""
    started = started or datetime.now(UTC) - timedelta(seconds=30)
    job = with_conditions(
        mpijob(name, namespace, workers, memory=memory, gpus=2), ("Running", "MPIJobRunning", iso(started))
    )
    now = datetime.now(UTC)
    events = correlator.observe(Observation("job", "ADDED", job, now))
    pods: dict[str, Obj] = {}
    for role, index in [("launcher", None), *(("worker", i) for i in range(workers))]:
        obj = pod(job, role, index, phase="Running", node=f"gpu-node-{index or 0}")
        obj["status"]["startTime"] = iso(started)
        pods[obj["metadata"]["name"]] = obj
        events += correlator.observe(Observation("pod", "ADDED", obj, now))
    return Run(job, pods, events)


def probe_for(settings: UsageSettings, correlator: Correlator, runs: list[Run]) -> UsageProbe:
    """A usage probe following the pods of ``runs``, as the watcher's sink tells it."""
    metrics = UsageMetrics(CollectorRegistry())
    probe = UsageProbe(settings, correlator, metrics, PrometheusReader(settings, observe=metrics.observe))
    for run in runs:
        for obj in run.pods.values():
            probe.track(WatchChange(MPI_PODS, "ADDED", obj))
    return probe


def correlator() -> Correlator:
    return Correlator(pending_ttl_s=60, clock=time.monotonic)
