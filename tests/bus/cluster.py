"""A freshly started 3-server cluster, its streams declared once its JetStream API answers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from controller.bus.client import NATS, JetStreamContext, NatsError
from controller.bus.streams import connect, ensure_streams
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.testing.natscluster import NatsCluster
from controller.testing.waits import until


async def declare_streams(
    js: JetStreamContext, topology: Topology, settings: NatsSettings, timeout_s: float = 60
) -> None:
    """:func:`ensure_streams`, asked again while the cluster's JetStream does not answer yet (a
    meta leader elected is not yet a JetStream API answering within its 5 s, on a loaded machine)."""
    failures: list[BaseException] = []

    async def declared() -> bool:
        try:
            await ensure_streams(js, topology, settings)
        except (NatsError, TimeoutError, PermissionError) as exc:  # a create not answered in time
            # reads as refused (ensure_streams cannot tell a forming cluster from a denied identity)
            failures.append(exc)
            return False
        return True

    await until(declared, timeout_s, lambda: failures[-3:], 0.1)


@dataclass(frozen=True)
class ClusterBus:
    """A cluster, the settings' topology on it and a connection to it."""

    cluster: NatsCluster
    topology: Topology
    nc: NATS
    js: JetStreamContext


@contextlib.asynccontextmanager
async def cluster_bus(settings: Settings, workdir: Path, client: str) -> AsyncIterator[ClusterBus]:
    """A 3-server cluster that ``settings`` now name (three replicas), its streams declared, and a
    connection named ``client``, closed at the end."""
    with NatsCluster(workdir / "nats") as cluster:
        settings.nats = NatsSettings(url=cluster.url, prefix=settings.nats.prefix, replicas=3)
        topology = Topology(settings.nats.prefix)
        nc = await connect(cluster.url, client)
        try:
            js = nc.jetstream()
            await declare_streams(js, topology, settings.nats)
            yield ClusterBus(cluster, topology, nc, js)
        finally:
            await nc.close()
