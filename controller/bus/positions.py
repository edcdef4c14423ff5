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

import asyncio
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
    """The stored position of each watch in ``names`` that has one, the keys asked for all at
    once: one after the other, a dozen requests on a watcher's loop busy with its start (the
    published versions' load, the log followers learning every pod) held every watch's resume
    back by seconds on a loaded box (``benchmarks/README.md``, issue 40). A bucket out of reach
    is logged and reads as none, a key out of reach as its own: those watches then list first."""
    try:
        kv = await open_published(nc.jetstream(), topology, settings)
    except (NatsError, TimeoutError) as exc:
        log.warning("watch positions not read, listing first: %r", exc)
        return {}

    async def position(name: str) -> str | None:
        try:
            entry = await kv.get(POSITIONS + name)
        except (KeyNotFoundError, KeyDeletedError):
            return None
        return entry.value.decode() if entry.value else None

    read = await asyncio.gather(*(position(name) for name in names), return_exceptions=True)
    positions: dict[str, str] = {}
    unread: list[BaseException] = []
    for name, outcome in zip(names, read, strict=True):
        if isinstance(outcome, NatsError | TimeoutError):
            unread.append(outcome)
        elif isinstance(outcome, BaseException):
            raise outcome
        elif outcome is not None:
            positions[name] = outcome
    if unread:
        count = f"{len(unread)} of {len(names)}"
        log.warning("%s watch positions not read, those watches list first: %r", count, unread[0])
    return positions


async def save_positions(nc: NATS, topology: Topology, positions: Mapping[str, str]) -> None:
    """Store ``positions`` (name → resourceVersion) without waiting for acknowledgements."""
    prefix = f"$KV.{topology.bucket(BUCKET)}.{POSITIONS}"
    try:
        for name, version in positions.items():
            await nc.publish(prefix + name, version.encode())
    except NatsError as exc:  # the client's buffer is full while it reconnects: saved next time
        log.warning("watch positions not saved: %r", exc)
