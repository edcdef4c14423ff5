"""Each namespace's share of ``LOGS``: a namespace past it evicts its own oldest lines, nobody else's.

``LOGS`` is bounded as a whole (``max_bytes``, the oldest messages of anyone going first) and
each run by its follower (``MPIJC_LOGS__RUN_MAX_BYTES``); neither stops the many runs of one
namespace from filling the stream and pushing every other namespace's lines out. JetStream
bounds bytes per stream only (per subject it counts messages), so the followers keep each
namespace's account in the key-value bucket ``logs-shares``, shared by the watcher replicas and
kept across restarts: per namespace, the bytes it stored as a few chunks in stream order, each
``(up to sequence, bytes)``. A follower notes what it stores (:meth:`LogShares.record`) and
settles once a second (:meth:`LogShares.settle`): its notes are added to each namespace's
account under the entry's revision (another replica's settling meanwhile: read again, add
again), chunks the stream no longer holds (aged out, or gone to its own limit) are dropped, and
while the account passes the share the namespace's oldest chunk is evicted — a purge of
``logs.<ns>.>`` up to that chunk's last sequence (JetStream's purge with a subject filter),
which touches no other namespace. A chunk holds about a sixteenth of the share, so a namespace
keeps between fifteen sixteenths of its share and its share, plus what it stored in the last
second. Messages are counted as the stream counts them, headers aside: subject and payload.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KeyValue

from controller.bus.answering import until_answered
from controller.bus.buckets import open_bucket
from controller.contract.subjects import Topology, escape_token

__all__ = ["BUCKET", "CHUNKS", "LogShares", "Share"]

log = logging.getLogger(__name__)

BUCKET = "logs-shares"
CHUNKS = 16
"""Chunks a share is counted in: the eviction's step, a sixteenth of the share."""
_ATTEMPTS = 8
"""Settlings of one namespace's account raced by other replicas before it waits for the next."""


@dataclass
class Share:
    """One namespace's account: chunks ``[up to sequence, bytes]`` in stream order."""

    chunks: list[list[int]] = field(default_factory=list)

    @property
    def total(self) -> int:
        """The bytes the namespace holds in the stream, as far as the account knows."""
        return sum(size for _, size in self.chunks)

    def add(self, upto: int, size: int, chunk_bytes: int) -> None:
        """Count ``size`` bytes stored at sequences up to ``upto``: into the newest chunk while it
        holds less than ``chunk_bytes``, else as a new one. A chunk's ``upto`` only grows, so the
        chunks stay in stream order however the replicas' notes interleave."""
        if self.chunks and self.chunks[-1][1] < chunk_bytes:
            last = self.chunks[-1]
            last[0], last[1] = max(last[0], upto), last[1] + size
        else:
            self.chunks.append([max(upto, self.chunks[-1][0] if self.chunks else 0), size])

    def forget_before(self, first_seq: int) -> None:
        """Drop the chunks whose every message is below ``first_seq`` (gone from the stream)."""
        self.chunks = [chunk for chunk in self.chunks if chunk[0] >= first_seq]

    def over(self, limit: int) -> Iterator[int]:
        """While the account passes ``limit``: drop its oldest chunk and yield the sequence
        everything of the namespace up to which must go (that chunk's last)."""
        while self.chunks and self.total > limit:
            upto, _ = self.chunks.pop(0)
            yield upto

    def encode(self) -> bytes:
        return json.dumps(self.chunks, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | None) -> Share:
        """An account as stored; an unreadable one (another version's) starts again empty."""
        try:
            chunks = json.loads(data or b"[]")
        except ValueError:
            return cls()
        valid = isinstance(chunks, list) and all(
            isinstance(c, list) and len(c) == 2 and all(isinstance(n, int) for n in c) for c in chunks
        )
        return cls([list(c) for c in chunks] if valid else [])


class LogShares:
    """The namespaces' accounts of what a follower stored (see the module)."""

    def __init__(
        self, js: JetStreamContext, topology: Topology, limit: int, *, replicas: int = 1, ttl_s: float = 0.0
    ) -> None:
        """``limit``: a namespace's share in bytes (0: none, nothing is counted); ``ttl_s``: how long
        an account not added to is kept (the stream's age limit: its lines are gone by then)."""
        self._js = js
        self._topology = topology
        self.limit = limit
        self._replicas = replicas
        self._ttl_s = ttl_s
        self._kv: KeyValue | None = None
        self._pending: dict[str, Share] = {}
        """Namespace → what it stored since the last settling, in chunks as its account counts."""

    @property
    def chunk_bytes(self) -> int:
        return max(1, self.limit // CHUNKS)

    def record(self, namespace: str, seq: int, size: int) -> None:
        """``size`` bytes of ``namespace`` were stored at sequence ``seq``."""
        if self.limit <= 0:
            return
        pending = self._pending.setdefault(namespace, Share())
        pending.add(seq, size, self.chunk_bytes)
        if len(pending.chunks) > 2 * CHUNKS:  # more than its share since the last settling:
            (_, first), (upto, second) = pending.chunks[:2]  # its oldest go together
            pending.chunks[:2] = [[upto, first + second]]

    async def settle(self) -> dict[str, int]:
        """Add what was recorded to the accounts and evict, in each namespace past its share, its
        oldest chunks; returns the chunks evicted per namespace. What could not be settled (the bus
        away) stays recorded for the next time."""
        if not self._pending:
            return {}
        kv = await self._bucket()
        info = await until_answered(lambda: self._js.stream_info(self._stream), f"stream {self._stream}")
        first_seq = info.state.first_seq
        evicted: dict[str, int] = {}
        for namespace in list(self._pending):
            count = await self._settle(kv, namespace, self._pending[namespace], first_seq)
            if count is None:
                continue
            del self._pending[namespace]
            if count:
                evicted[namespace] = count
        return evicted

    async def account(self, namespace: str) -> Share:
        """``namespace``'s account as stored."""
        kv = await self._bucket()
        try:
            entry = await kv.get(_key(namespace))
        except KeyNotFoundError:
            return Share()
        return Share.decode(entry.value)

    @property
    def _stream(self) -> str:
        return self._topology.stream("logs")

    async def _bucket(self) -> KeyValue:
        if self._kv is None:
            config = KeyValueConfig(
                bucket=self._topology.bucket(BUCKET),
                history=1,
                ttl=self._ttl_s or None,
                storage=StorageType.FILE,
                replicas=self._replicas,
                description="each namespace's bytes on LOGS, to evict its own oldest past its share",
            )
            self._kv = await open_bucket(self._js, config)
        return self._kv

    async def _settle(self, kv: KeyValue, namespace: str, pending: Share, first_seq: int) -> int | None:
        """Add ``pending`` to ``namespace``'s account and evict what passes the share; the chunks
        evicted, or None when other replicas kept settling it first."""
        key = _key(namespace)
        for _ in range(_ATTEMPTS):
            try:
                entry = await kv.get(key)
            except KeyNotFoundError:
                share, revision = Share(), None
            else:
                share, revision = Share.decode(entry.value), entry.revision
            share.forget_before(first_seq)
            for upto, size in pending.chunks:
                share.add(upto, size, self.chunk_bytes)
            evict = list(share.over(self.limit))
            if evict:  # first: an account that says evicted is evicted (a purge again changes nothing)
                await self._js.purge_stream(
                    self._stream, subject=self._topology.namespace_logs(namespace), seq=evict[-1] + 1
                )
            try:
                if revision is None:
                    await kv.create(key, share.encode())
                else:
                    await kv.update(key, share.encode(), last=revision)
            except KeyWrongLastSequenceError:
                continue  # another replica settled it meanwhile: read again
            if evict:
                log.warning(
                    "namespace %s passed its log share of %d bytes: its lines up to sequence %d evicted",
                    namespace,
                    self.limit,
                    evict[-1],
                )
            return len(evict)
        return None


def _key(namespace: str) -> str:
    """The bucket key of a namespace (a key takes ``[-/_=.a-zA-Z0-9]``: ``~`` becomes ``=``)."""
    return escape_token(namespace).replace("~", "=")
