"""A key-value bucket a role keeps its state in across restarts, read whole by key prefix.

The rules consumer keeps one snapshot per partition under the prefix ``p<partition>``
(:mod:`consumers.rules.snapshot`): written key by key (:func:`write`), loaded by one watch of the
prefix that ends when the watch has caught up. Deleted or purged keys come back as markers, which the
caller may purge (:func:`controller.bus.buckets.forget`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field

from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyDeletedError, KeyNotFoundError
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from controller.bus.buckets import open_bucket

__all__ = ["Prefix", "has_key", "read_prefix", "state_bucket", "write"]

_LOAD_TIMEOUT_S = 5.0
_EMPTY_WAIT_S = 0.5  # after the client says "no more", how long an entry may still take to come


async def state_bucket(js: JetStreamContext, name: str, replicas: int = 1, description: str = "") -> KeyValue:
    """Bucket ``name``, created on first use (file storage, one value per key)."""
    return await open_bucket(
        js,
        KeyValueConfig(
            bucket=name, history=1, storage=StorageType.FILE, replicas=replicas, description=description
        ),
    )


async def has_key(kv: KeyValue, key: str) -> bool:
    """Whether ``key`` holds a value (not deleted, not purged)."""
    try:
        await kv.get(key)
    except (KeyNotFoundError, KeyDeletedError):
        return False
    return True


@dataclass
class Prefix:
    """The keys under one prefix: their values, in the order the watch delivered them, and the
    keys that hold only a delete or purge marker."""

    values: list[tuple[str, bytes]] = field(default_factory=list)
    markers: list[str] = field(default_factory=list)


async def read_prefix(kv: KeyValue, prefix: str) -> Prefix:
    """Every key under ``prefix.`` with its value, by one watch that ends once it caught up."""
    read = Prefix()
    watcher = await kv.watch(f"{prefix}.>")
    # The client's "no more" marker (None) may come before the entries already delivered
    # (it is sent from consumer info, the entries wait for the watch to be set up), so the
    # end is the entry with nothing pending after it; the marker only shortens the wait
    # when the prefix has no keys at all.
    wait = _LOAD_TIMEOUT_S
    try:
        while True:
            try:
                entry = await watcher.updates(timeout=wait)  # type: ignore[no-untyped-call]
            except NatsTimeoutError:
                break
            if entry is None:
                wait = _EMPTY_WAIT_S
                continue
            if entry.operation in (KV_DEL, KV_PURGE) or not entry.value:
                read.markers.append(entry.key)
            else:
                read.values.append((entry.key, entry.value))
            if not entry.delta:  # nothing pending after it: the watch has caught up
                break
    finally:
        await watcher.stop()  # type: ignore[no-untyped-call]
    return read


async def write(kv: KeyValue, values: Mapping[str, bytes]) -> None:
    """Put each key's value, all at once (each put is acknowledged by JetStream)."""
    await asyncio.gather(*(kv.put(key, value) for key, value in values.items()))
