"""A real Alertmanager for tests: Debian's ``prometheus-alertmanager``, found or installed.

:func:`alertmanager_binary` looks on ``PATH`` (``prometheus-alertmanager``, then
``alertmanager``), then installs Debian's package (:func:`controller.testing.packages.debian_binary`);
``None`` with the reason when that does not work. :class:`Alertmanager` runs one on loopback
with a config that routes every alert to one webhook receiver, optionally as a member of a
gossip cluster (``--cluster.*``); it can be stopped and started again on the same port and
storage, as an outage.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.notify.alertmanager import AlertmanagerPusher
from consumers.notify.metrics import AlertmanagerMetrics
from controller.contract.settings import AlertmanagerSettings
from controller.metrics import PipelineMetrics
from controller.testing.packages import debian_binary, stop_server, until_ready
from controller.testing.ports import free_port
from controller.testing.waits import running_until_exit, until

PACKAGE = "prometheus-alertmanager"


def alertmanager_binary() -> tuple[str | None, str]:
    """The Alertmanager executable, installing Debian's package when missing; else ``None`` and why."""
    return debian_binary(PACKAGE, (PACKAGE, "alertmanager"))


GROUP_BY = ("alertname", "namespace", "training_job", "rule")


def config(
    receiver_url: str,
    group_wait: str = "0s",
    group_interval: str = "1s",
    group_by: tuple[str, ...] = GROUP_BY,
) -> str:
    """A config routing every alert to one webhook, grouped by ``group_by``."""
    return (
        "route:\n"
        "  receiver: hook\n"
        f"  group_by: [{', '.join(group_by)}]\n"
        f"  group_wait: {group_wait}\n"
        f"  group_interval: {group_interval}\n"
        "  repeat_interval: 1h\n"
        "receivers:\n"
        "  - name: hook\n"
        "    webhook_configs:\n"
        f"      - url: {receiver_url}\n"
        "        send_resolved: true\n"
    )


class Alertmanager:
    """One Alertmanager process on loopback; ``await start()``, ``await stop()`` (again and again)."""

    def __init__(
        self,
        binary: str,
        workdir: Path,
        receiver_url: str,
        *,
        cluster_port: int | None = None,
        peers: list[int] | None = None,
        group_interval: str = "1s",
        peer_timeout: str = "1s",
        group_by: tuple[str, ...] = GROUP_BY,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        self.port = free_port()
        self.cluster_port = cluster_port
        self.peers = peers or []
        self.peer_timeout = peer_timeout
        workdir.mkdir(parents=True, exist_ok=True)
        (workdir / "alertmanager.yml").write_text(
            config(receiver_url, group_interval=group_interval, group_by=group_by)
        )
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _argv(self) -> list[str]:
        argv = [
            self.binary,
            f"--config.file={self.workdir / 'alertmanager.yml'}",
            f"--storage.path={self.workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        if self.cluster_port is None:
            return [*argv, "--cluster.listen-address="]
        return [
            *argv,
            f"--cluster.listen-address=127.0.0.1:{self.cluster_port}",
            f"--cluster.advertise-address=127.0.0.1:{self.cluster_port}",
            *[f"--cluster.peer=127.0.0.1:{p}" for p in self.peers],
            "--cluster.gossip-interval=50ms",
            "--cluster.pushpull-interval=1s",
            f"--cluster.peer-timeout={self.peer_timeout}",
            "--cluster.settle-timeout=0s",
        ]

    def _spawn(self) -> subprocess.Popen[bytes]:
        with (self.workdir / "alertmanager.log").open("ab") as log:
            return subprocess.Popen(self._argv(), stdout=log, stderr=subprocess.STDOUT)

    async def start(self) -> None:
        """Start it and wait until it answers ``/-/ready``."""
        self._process = self._spawn()
        await until_ready(self._process, self.url, self.workdir / "alertmanager.log", "alertmanager")

    async def stop(self) -> None:
        """Stop it gracefully (it writes its notification log to storage)."""
        process, self._process = self._process, None
        await stop_server(process)

    async def notified(self) -> float:
        """Webhook notifications it has sent and seen answered (``alertmanager_notifications_total``):
        counted right before it records them in its notification log, which a restart reads to
        know a resolve is owed. A stop before that record is a restart that forgot the firing."""
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.url}/metrics", timeout=5)
        response.raise_for_status()
        for line in response.text.splitlines():
            if line.startswith("alertmanager_notifications_total{") and 'integration="webhook"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    async def alerts(self) -> list[dict[str, Any]]:
        """The alerts it holds (``GET /api/v2/alerts``)."""
        async with httpx.AsyncClient() as client:
            response = await client.get(f"{self.url}/api/v2/alerts", timeout=5)
        response.raise_for_status()
        found: list[dict[str, Any]] = response.json()
        return found

    async def metric(self, name: str) -> float:
        """The sum of one of its own Prometheus series over all label sets."""
        async with httpx.AsyncClient() as client:
            text = (await client.get(f"{self.url}/metrics", timeout=5)).text
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name) and line[len(name) : len(name) + 1] in {"{", " "}
        )


@contextlib.asynccontextmanager
async def pusher_running(
    engine: AsyncEngine, settings: AlertmanagerSettings, metrics: PipelineMetrics
) -> AsyncIterator[AlertmanagerPusher]:
    """An Alertmanager pusher running until the block ends (listening for wake-ups when it starts)."""
    pusher = AlertmanagerPusher(engine, settings, AlertmanagerMetrics.on(metrics.registry))
    async with running_until_exit(pusher.run):
        await until(pusher.listening.is_set, timeout_s=10)
        yield pusher
