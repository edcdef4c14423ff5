"""A real Prometheus scraping a :class:`~controller.testing.curves.CurveExporter`: series that
follow curves in time (a leak, a sawtooth, a straggler's utilization)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from controller.testing.curves import CurveExporter
from controller.testing.prometheus import Prometheus, prometheus_binary


@dataclass
class Curves:
    """The exporter the test sets curves on and the Prometheus scraping it every second."""

    exporter: CurveExporter
    prometheus: Prometheus


@pytest.fixture
async def curves(tmp_path: Path) -> AsyncIterator[Curves]:
    binary, why = prometheus_binary()
    if binary is None:
        pytest.skip(why)
    exporter = CurveExporter()
    exporter.start()
    prometheus = Prometheus(binary, tmp_path / "prometheus", [f"127.0.0.1:{exporter.port}"])
    await prometheus.start()
    try:
        yield Curves(exporter, prometheus)
    finally:
        await prometheus.stop()
        exporter.stop()
