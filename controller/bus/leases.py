"""Who runs which partition of a partitioned role: leases in a JetStream key-value bucket.

A lease bucket (:func:`lease_bucket`) has a TTL: every entry disappears that long after its
last write, which is all the failure detection there is.

- ``member.<replica>``: each replica rewrites its own key every heartbeat; the live keys say
  how many replicas share the work, hence each one's fair share, ``ceil(partitions / members)``;
- ``lease.p<partition>``: claimed with ``create`` (fails while another replica holds it),
  renewed with ``update`` against the revision last written (fails once someone else took it
  after it expired), released with ``delete`` when handing a partition over.

A replica that stops renewing (killed, partitioned off, paused) loses its leases after the TTL
and the others claim them; a replica holding more than its share releases the surplus, so a
newcomer gets work. The rules consumer (:mod:`consumers.rules.replica`) partitions its work
this way; the engine of each partition lives in its own snapshot
(:mod:`consumers.rules.snapshot`), so whoever claims a partition resumes where its last holder
left it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import secrets
import socket

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import (
    APIError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
    NoKeysError,
)
from nats.js.kv import KeyValue

from controller.bus.buckets import open_bucket

__all__ = ["Leases", "lease_bucket", "replica_name"]

log = logging.getLogger(__name__)


def replica_name() -> str:
    """This process's name in the lease bucket: host, pid and a random tail (a restarted pod is new)."""
    raw = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"
    return re.sub(r"[^A-Za-z0-9_-]", "-", raw)


async def lease_bucket(
    js: JetStreamContext, name: str, ttl_s: float, replicas: int = 1, description: str = "leases"
) -> KeyValue:
    """Lease bucket ``name``, created on first use (memory storage: leases need not survive NATS)."""
    return await open_bucket(
        js,
        KeyValueConfig(
            bucket=name,
            history=1,
            ttl=ttl_s,
            storage=StorageType.MEMORY,
            replicas=replicas,
            description=description,
        ),
    )


class Leases:
    """One replica's view of the lease bucket; ``role`` names it in the log."""

    def __init__(self, kv: KeyValue, replica: str, partitions: int, role: str) -> None:
        self._kv = kv
        self._role = role
        self.replica = replica
        self.partitions = partitions
        self._revisions: dict[int, int] = {}

    @property
    def held(self) -> list[int]:
        """Partitions this replica holds a lease on, as far as it knows."""
        return sorted(self._revisions)

    async def alive(self) -> None:
        """Say this replica is alive (one write: no count of the members)."""
        await self._kv.put(f"member.{self.replica}", b"1")

    async def heartbeat(self) -> int:
        """Say this replica is alive; returns its fair share of the partitions."""
        await self.alive()
        try:
            members = sum(1 for key in await self._kv.keys() if key.startswith("member."))
        except NoKeysError:
            members = 1
        return math.ceil(self.partitions / max(members, 1))

    async def claim(self, partition: int) -> bool:
        """Take ``partition`` if nobody holds it."""
        try:
            self._revisions[partition] = await self._kv.create(f"lease.p{partition}", self.replica.encode())
        except KeyWrongLastSequenceError:
            return False
        log.info("%s replica %s claimed partition %d", self._role, self.replica, partition)
        return True

    async def renew(self, partition: int) -> bool:
        """Keep ``partition``; False (and forgotten) if the lease was lost meanwhile."""
        revision = self._revisions.get(partition)
        if revision is None:
            return False
        try:
            self._revisions[partition] = await self._kv.update(
                f"lease.p{partition}", self.replica.encode(), last=revision
            )
        except (KeyWrongLastSequenceError, KeyNotFoundError):
            del self._revisions[partition]
            log.warning("%s replica %s lost the lease on partition %d", self._role, self.replica, partition)
            return False
        return True

    async def release(self, partition: int) -> None:
        """Hand ``partition`` back at once (another replica may claim it on its next heartbeat)."""
        revision = self._revisions.pop(partition, None)
        if revision is None:
            return
        with contextlib.suppress(APIError):  # taken over meanwhile: not ours to delete
            await self._kv.delete(f"lease.p{partition}", last=revision)
        log.info("%s replica %s released partition %d", self._role, self.replica, partition)

    async def leave(self) -> None:
        """Release everything and stop counting as a member."""
        for partition in list(self._revisions):
            await self.release(partition)
        with contextlib.suppress(APIError):
            await self._kv.delete(f"member.{self.replica}")
