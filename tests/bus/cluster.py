"""The streams of a freshly started 3-server cluster, declared once its JetStream API answers."""

from __future__ import annotations

from controller.bus.client import JetStreamContext, NatsError
from controller.bus.streams import ensure_streams
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology
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
