"""Where each watch stood, kept where it survives the process.

A watch that starts from a resourceVersion gets every change after it, deletions included
(Kubernetes docs, "Efficient detection of changes"); a list gets only the present state, and
for 17,000 pods takes seconds during which a new failure waits behind it. So the watchers
remember, per watch, the resourceVersion up to which every change was handed to the bus, and a
restarted or newly elected watcher starts each watch from there at once, listing beside it
(:mod:`watchers.watching`). The positions are keys ``watch.<name>`` of the ``published``
bucket (:mod:`controller.bus.versions`), written with plain publishes like the versions: one
lost with its server only makes the next start resume from an older position, which the
versions and JetStream's duplicate window absorb. A position too old for the API server
(compacted away: ``410 Gone``) makes that watch list first, as on a first start.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from nats.js.errors import KeyDeletedError, KeyNotFoundError

from controller.bus.versions import BUCKET, POSITIONS, open_published
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology

__all__ = ["read_positions", "save_positions"]

log = logging.getLogger(__name__)


async def read_positions(
    nc: NATS, topology: Topology, settings: NatsSettings, names: Collection[str]
) -> dict[str, str]:
    """The stored position of each watch in ``names`` that has one. A bucket out of reach is
    logged and reads as none: the watches then list first."""
    positions: dict[str, str] = {}
    try:
        kv = await open_published(nc.jetstream(), topology, settings)
        for name in names:
            try:
                entry = await kv.get(POSITIONS + name)
            except (KeyNotFoundError, KeyDeletedError):
                continue
            if entry.value:
                positions[name] = entry.value.decode()
    except (NatsError, TimeoutError) as exc:
        log.warning("watch positions not read, listing first: %r", exc)
        return {}
    return positions


async def save_positions(nc: NATS, topology: Topology, positions: Mapping[str, str]) -> None:
    """Store ``positions`` (name → resourceVersion) without waiting for acknowledgements."""
    prefix = f"$KV.{topology.bucket(BUCKET)}.{POSITIONS}"
    try:
        for name, version in positions.items():
            await nc.publish(prefix + name, version.encode())
    except NatsError as exc:  # the client's buffer is full while it reconnects: saved next time
        log.warning("watch positions not saved: %r", exc)
