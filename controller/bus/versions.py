"""What was last published for each watched object, kept where it survives the process.

After a restart, an upgrade or a leader change the watchers list everything again. Within the
stream's duplicate window JetStream drops what it already holds; past it, every unchanged
pod and job would reach every consumer again (34,000 messages for 1,000 jobs of 16 workers).
:class:`PublishedVersions` remembers, per object, the version last published in a JetStream
key-value bucket (``published``: key ``<type>.<uid>``, value ``<resourceVersion>:<change>``,
one revision kept, entries expiring with the streams' ``max_age``). It is loaded once at
start and consulted before publishing: an observation whose object is at the version already
published is dropped. Log probes are never remembered (each is new by nature), and a deleted
object is forgotten, its key purged from the bucket (:func:`controller.bus.buckets.forget`): the
bucket, each start's load and the watcher's memory hold the objects that exist, not every pod
the cluster deleted in a week.

The versions are written after their observations are stored, as plain NATS publishes to the
bucket's subjects: JetStream stores them all the same, and nobody waits for, or parses, an
acknowledgement per object (that had doubled the watcher's cost per object). One that is lost
with its server costs only a republish after the next restart, which JetStream or the
consumers' idempotent writes absorb.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Sequence

from nats.aio.client import Client as NATS
from nats.errors import Error as NatsError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from controller.bus.buckets import forget, open_bucket
from controller.bus.publishing import Publisher
from controller.contract.events import BusEvent, version_of
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics

__all__ = ["PublishedVersions", "VersionedPublisher", "versioned"]

log = logging.getLogger(__name__)

BUCKET = "published"
_UNREMEMBERED = frozenset({"log"})
_GONE = ":DELETED"


def _key(event: BusEvent) -> str:
    return f"{event.type}.{event.uid}"


def _value(event: BusEvent) -> str:
    return version_of(event)  # a pod version republished with its late log tail is a change


class PublishedVersions:
    """The last published version of every object, mirrored from a KV bucket."""

    def __init__(self, nc: NATS, topology: Topology) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._bucket = topology.bucket(BUCKET)
        self._kv: KeyValue | None = None
        self._known: dict[str, str] = {}
        self._gone: list[str] = []
        """Keys of deleted objects, to be purged from the bucket."""
        self._forgetting: asyncio.Task[None] | None = None

    async def load(self, settings: NatsSettings, batch: int = 1000) -> int:
        """Create the bucket if needed and read it whole; returns how many objects it holds."""
        self._kv = await open_bucket(
            self._js,
            KeyValueConfig(
                bucket=self._bucket,
                history=1,
                ttl=settings.max_age_s,
                storage=StorageType.FILE,
                replicas=settings.replicas,
            ),
        )
        stream = f"KV_{self._bucket}"
        info = await self._js.stream_info(stream)
        if not info.state.messages:
            return 0
        sub = await self._js.pull_subscribe(
            f"$KV.{self._bucket}.>",
            stream=stream,
            config=ConsumerConfig(
                ack_policy=AckPolicy.NONE,
                deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
                mem_storage=True,
                inactive_threshold=30.0,
            ),
        )
        prefix = f"$KV.{self._bucket}."
        gone: list[str] = []
        try:
            while True:
                try:
                    msgs = await sub.fetch(batch, timeout=2.0)
                except (NatsTimeoutError, TimeoutError):
                    break
                for msg in msgs:
                    key, value = msg.subject.removeprefix(prefix), msg.data.decode()
                    if (msg.headers or {}).get("KV-Operation") in ("DEL", "PURGE") or value.endswith(_GONE):
                        gone.append(key)  # an earlier version kept deleted objects: never needed again
                        self._known.pop(key, None)
                    else:
                        self._known[key] = value
                if msgs and msgs[-1].metadata.num_pending == 0:
                    break
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        await self._forget(gone)
        return len(self._known)

    def changed(self, events: Sequence[BusEvent]) -> list[BusEvent]:
        """``events`` less those whose object was already published at that version."""
        return [e for e in events if e.type in _UNREMEMBERED or self._known.get(_key(e)) != _value(e)]

    async def remember(self, events: Sequence[BusEvent]) -> None:
        """Record ``events`` as published (puts nobody waits for); a lost one costs a republish later.

        A deleted object is forgotten: no relist lists it again, and kept it would grow the
        bucket, each start's load and the watcher's memory with every pod the cluster ever
        deleted. Its key is purged in the background (a purge is a request; awaited here it held
        the publish loop back and observations queued up); its last value says ``DELETED``, so a
        purge lost with the process is done by the next load."""
        prefix = f"$KV.{self._bucket}."
        try:
            for event in events:
                if event.type not in _UNREMEMBERED:
                    key, value = _key(event), _value(event)
                    await self._nc.publish(prefix + key, value.encode())
                    if event.change == "DELETED":
                        self._known.pop(key, None)
                        self._gone.append(key)
                    else:
                        self._known[key] = value
        except NatsError as exc:  # the client's buffer is full while it reconnects: known next time
            log.warning("published versions not recorded: %r", exc)
        if self._gone and (self._forgetting is None or self._forgetting.done()):
            self._forgetting = asyncio.create_task(self._forget_gone())

    async def _forget_gone(self) -> None:
        """Purge the keys of deleted objects until none is left to purge."""
        while self._gone:
            keys, self._gone = self._gone, []
            await self._forget(keys)

    async def _forget(self, keys: list[str]) -> None:
        """Remove ``keys`` from the bucket; one left behind only takes room until it expires."""
        if not keys or self._kv is None:
            return
        try:
            await forget(self._kv, keys)
        except (NatsError, TimeoutError) as exc:
            log.warning("versions of %d deleted objects not removed: %r", len(keys), exc)


class VersionedPublisher:
    """Publishes observations whose object changed since it was last published, then remembers them."""

    def __init__(
        self,
        publisher: Publisher,
        versions: PublishedVersions,
        metrics: PipelineMetrics,
        loaded: Awaitable[object] | None = None,
    ) -> None:
        self._publisher = publisher
        self._versions = versions
        self._metrics = metrics
        self._loaded = loaded

    async def publish(self, observed: Sequence[BusEvent]) -> int:
        """Publish what changed (once the versions are loaded); returns how many were new to the stream."""
        if self._loaded is not None:
            await self._loaded
        changed = self._versions.changed(observed)
        if len(changed) < len(observed):
            self._metrics.skipped_objects.labels("unchanged").inc(len(observed) - len(changed))
        if not changed:
            return 0
        new = await self._publisher.publish(changed)
        await self._versions.remember(changed)
        return new


def versioned(
    nc: NATS, topology: Topology, settings: NatsSettings, metrics: PipelineMetrics
) -> VersionedPublisher:
    """A publisher that skips what was published before the last restart. The bucket is loaded
    in the background, while the watchers list: the first publish waits for it."""
    publisher = Publisher(nc.jetstream(), topology, settings.publish_retry_s)
    versions = PublishedVersions(nc, topology)

    async def load() -> None:
        started = asyncio.get_running_loop().time()
        held = await versions.load(settings)
        log.info("%d published versions loaded in %.2fs", held, asyncio.get_running_loop().time() - started)

    return VersionedPublisher(publisher, versions, metrics, asyncio.ensure_future(load()))
