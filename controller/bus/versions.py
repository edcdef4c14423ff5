"""The ``published`` bucket: what was last published for each watched object, kept where it
survives the process (the bucket's I/O; what the watchers keep in it and why is
:mod:`watchers.published`).

A JetStream key-value bucket (``published``: key ``<type>.<uid>``, one revision kept, entries
expiring with the streams' ``max_age``), read whole at start (:meth:`PublishedBucket.read`) and
written with plain NATS publishes to the bucket's subjects (:meth:`PublishedBucket.put`):
JetStream stores them all the same, and nobody waits for, or parses, an acknowledgement per
object (that had doubled the watcher's cost per object). One that is lost with its server costs
only a republish after the next restart, which JetStream or the consumers' idempotent writes
absorb. Keys of deleted objects are purged in the background
(:meth:`PublishedBucket.forget_later`, :func:`controller.bus.buckets.forget`). The keys under
:data:`POSITIONS` hold where each watch stood (:mod:`controller.bus.positions`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import DeliverPolicy, KeyValueConfig, StorageType
from nats.js.kv import KV_DEL, KV_PURGE, KeyValue

from controller.bus.answering import until_answered
from controller.bus.buckets import forget, open_bucket
from controller.contract.phases import Phases
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology

__all__ = ["BUCKET", "POSITIONS", "PublishedBucket", "open_published", "watch_bucket"]

log = logging.getLogger(__name__)

BUCKET = "published"
SILENCE_S = 2.0
"""A read of the bucket whole ends when nothing more came for this long (the stream emptied
meanwhile, or the server went away)."""
POSITIONS = "watch."
"""Prefix of the bucket's keys that hold where each watch stood (:mod:`controller.bus.positions`)."""


async def open_published(js: JetStreamContext, topology: Topology, settings: NatsSettings) -> KeyValue:
    """The ``published`` bucket, created if it does not exist yet."""
    return await open_bucket(
        js,
        KeyValueConfig(
            bucket=topology.bucket(BUCKET),
            history=1,
            ttl=settings.max_age_s,
            storage=StorageType.FILE,
            replicas=settings.replicas,
        ),
    )


async def watch_bucket(kv: KeyValue, keys: str) -> AsyncGenerator[tuple[str, bytes | None, bool]]:
    """The entries of ``kv`` matching ``keys`` as they stand, then each change after:
    ``(key, value, caught_up)``, the value ``None`` once the key is deleted or purged,
    ``caught_up`` on the first entry with nothing pending after it (every entry held at the
    start told)."""
    watcher = await kv.watch(keys)
    caught_up = False
    try:
        async for entry in watcher:
            if entry is None:  # may come before the entries already sent: the deltas say when all are in
                continue
            last = not caught_up and not entry.delta
            caught_up = caught_up or last
            deleted = entry.operation in (KV_DEL, KV_PURGE)
            yield entry.key, None if deleted else entry.value, last
    finally:
        with contextlib.suppress(Exception):
            await watcher.stop()  # type: ignore[no-untyped-call]


class PublishedBucket:
    """The ``published`` bucket's reads and writes: read whole, put, purge in the background."""

    def __init__(self, nc: NATS, topology: Topology) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._topology = topology
        self._bucket = topology.bucket(BUCKET)
        self._kv: KeyValue | None = None
        self._gone: list[tuple[str, bytes]] = []
        """Keys of deleted objects (and their last values), to be purged from the bucket."""
        self._forgetting: asyncio.Task[None] | None = None
        self._purging: set[asyncio.Task[None]] = set()

    async def read(self, settings: NatsSettings, phases: Phases | None = None) -> list[tuple[str, str, bool]]:
        """Create the bucket if needed and read it whole: ``(key, value, deleted)`` of every key
        but the watch positions, ``deleted`` where its last operation removed it. ``phases``: each
        step's time is marked there (:mod:`controller.contract.phases`)."""
        phases = phases if phases is not None else Phases()
        self._kv = await open_published(self._js, self._topology, settings)
        phases.mark("open bucket")
        stream = f"KV_{self._bucket}"
        info = await until_answered(lambda: self._js.stream_info(stream), stream, missing=True)
        phases.mark(f"stream info ({info.state.messages} messages)")
        if not info.state.messages:
            return []
        prefix = f"$KV.{self._bucket}."
        entries: list[tuple[str, str, bool]] = []
        for msg in await self._last_per_subject(stream, f"{prefix}>", phases):
            key = msg.subject.removeprefix(prefix)
            if key.startswith(POSITIONS):
                continue  # where a watch stood, not an object
            deleted = (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE")
            entries.append((key, msg.data.decode(), deleted))
        return entries

    async def last_per_subject(self, stream: str, subject: str) -> AsyncIterator[bytes]:
        """The data of the last message of each subject matching ``subject`` in ``stream``."""
        for msg in await self._last_per_subject(stream, subject):
            yield msg.data

    async def _last_per_subject(self, stream: str, subject: str, phases: Phases | None = None) -> list[Msg]:
        """The last message of each subject matching ``subject`` in ``stream``, pushed by an
        ordered consumer: the server streams them under flow control. (Pulled in batches, a busy
        event loop took them a few at a time, one request each: 17,400 requests for 18,000
        versions at a restart.) Taken by a callback, not ``next_msg``: that costs a task, a
        ``wait_for`` and a uuid per message, most of the load's CPU. Ends when the last one
        came, or when none came for ``SILENCE_S``."""
        phases = phases if phases is not None else Phases()
        msgs: list[Msg] = []
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        first: list[float] = []

        async def take(msg: Msg) -> None:
            msgs.append(msg)
            if not first:
                first.append(loop.time())
            if msg.metadata.num_pending == 0:
                done.set()

        sub = await self._js.subscribe(
            subject,
            stream=stream,
            cb=take,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
            inactive_threshold=30.0,
        )
        subscribed = loop.time()
        phases.mark("subscribe")
        try:
            taken = -1
            while not done.is_set() and taken < len(msgs):  # until the last, or a silence
                taken = len(msgs)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(SILENCE_S):
                        await done.wait()
            after = f", the first after {first[0] - subscribed:.3f}s" if first else ""
            phases.mark(f"{len(msgs)} messages{after}{'' if done.is_set() else ', ended by a silence'}")
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        return msgs

    async def put(self, key: str, value: bytes) -> None:
        """Write ``key`` with a plain publish nobody waits for (``NatsError`` while the client's
        buffer is full during a reconnect)."""
        await self._nc.publish(f"$KV.{self._bucket}.{key}", value)

    def forget_later(self, gone: Sequence[tuple[str, bytes]]) -> None:
        """Purge the keys of deleted objects (with their last values) in the background (a purge
        is a request; awaited by the caller it held the publish loop back)."""
        self._gone.extend(gone)
        if self._gone and (self._forgetting is None or self._forgetting.done()):
            self._forgetting = asyncio.create_task(self._forget_gone())

    def forget_read(self, keys: list[str]) -> None:
        """Purge ``keys``, read from the bucket (so stored already), in the background: one purge
        request per key, thousands after a day of deleted runs, had held a restart's load (and the
        watcher's first publish) back for half a minute when the server was slow to answer them."""
        if keys:
            task = asyncio.create_task(self.forget(keys))
            self._purging.add(task)
            task.add_done_callback(self._purging.discard)

    async def _forget_gone(self) -> None:
        """Purge the keys of deleted objects until none is left to purge.

        The values were plain publishes: the server stores them from the stream's inbound queue,
        which a purge request does not wait for, so a purge could run first and the value stay.
        One acknowledged write after them (the last value again) comes back once they are all
        stored; the purges follow it."""
        while self._gone:
            gone, self._gone = self._gone, []
            last, value = gone[-1]
            try:
                await self._js.publish(f"$KV.{self._bucket}.{last}", value)
            except (NatsError, TimeoutError) as exc:
                log.warning("versions of %d deleted objects not removed: %r", len(gone), exc)
                continue
            await self.forget([key for key, _ in gone])

    async def forget(self, keys: list[str]) -> None:
        """Remove ``keys`` from the bucket; one left behind only takes room until it expires."""
        if not keys or self._kv is None:
            return
        try:
            await forget(self._kv, keys)
        except (NatsError, TimeoutError) as exc:
            log.warning("versions of %d deleted objects not removed: %r", len(keys), exc)
