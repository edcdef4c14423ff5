"""Where the admission webhook keeps the records JetStream could not store yet, and the lazy bus.

A review is answered only after its record is either stored by JetStream or written to the
:class:`Spool`; the webhook's drain loop publishes spooled records again once NATS answers and
removes each only after JetStream acknowledged it. The ``Nats-Msg-Id`` is the record id, so a
record published twice (acknowledged, then the process died before removing it) is stored once
within the stream's duplicate window.

:class:`FileSpool` is the shipped implementation: one JSON file per record in a directory on a
volume (``admission.spool_dir``), written to a temporary name, fsynced and renamed, so a crash
leaves either the whole record or nothing. It needs neither NATS nor a database, which is the
point: it is what remains when NATS is away, and the admission pod has no database
credentials (docs/admission.md).

:class:`LazyJetStream` connects to NATS in the background, so the webhook starts, answers and
spools while NATS is still down (a restart during an outage must not cost records).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import ValidationError

from controller.bus.client import NATS
from controller.bus.publishing import Publisher
from controller.bus.streams import connect, disconnect, ensure_streams
from controller.contract.audit import AuditRecord, parse_audit_record
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology

__all__ = ["FileSpool", "LazyJetStream", "Spool", "Spooled"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Spooled:
    """A record read back from the spool, with the key that removes it."""

    key: str
    record: AuditRecord


class Spool(Protocol):
    """Durable storage for records waiting for JetStream (oldest first)."""

    async def put(self, record: AuditRecord) -> None:
        """Store ``record`` durably; return only once it would survive a crash."""
        ...

    async def take(self, limit: int) -> list[Spooled]:
        """Up to ``limit`` of the oldest records (they stay until :meth:`remove`)."""
        ...

    async def remove(self, keys: Sequence[str]) -> None:
        """Forget records JetStream has stored."""
        ...

    async def count(self) -> int:
        """How many records wait."""
        ...


class FileSpool:
    """A :class:`Spool` in a directory: ``<ns since epoch>-<hash of id>.json`` per record."""

    SUFFIX = ".json"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._bad = directory / "unreadable"

    async def put(self, record: AuditRecord) -> None:
        await asyncio.to_thread(self._put, record)

    def _put(self, record: AuditRecord) -> None:
        digest = hashlib.sha256(record.id.encode()).hexdigest()[:24]
        name = f"{time.time_ns():020d}-{digest}{self.SUFFIX}"
        temporary = self.directory / f".{name}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, record.model_dump_json().encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        temporary.replace(self.directory / name)
        self._sync_directory()

    def _sync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    async def take(self, limit: int) -> list[Spooled]:
        return await asyncio.to_thread(self._take, limit)

    def _take(self, limit: int) -> list[Spooled]:
        taken: list[Spooled] = []
        for name in sorted(self._names()):
            if len(taken) >= limit:
                break
            path = self.directory / name
            try:
                taken.append(Spooled(name, parse_audit_record(path.read_bytes())))
            except FileNotFoundError:
                continue  # another drain removed it
            except (OSError, ValidationError) as exc:
                log.error("spooled record %s is unreadable (%s); moved to %s", path, exc, self._bad)
                self._bad.mkdir(exist_ok=True)
                with contextlib.suppress(OSError):
                    path.replace(self._bad / name)
        return taken

    def _names(self) -> list[str]:
        return [
            entry.name
            for entry in os.scandir(self.directory)
            if entry.is_file() and entry.name.endswith(self.SUFFIX) and not entry.name.startswith(".")
        ]

    async def remove(self, keys: Sequence[str]) -> None:
        await asyncio.to_thread(self._remove, keys)

    def _remove(self, keys: Sequence[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                (self.directory / key).unlink()
        self._sync_directory()

    async def count(self) -> int:
        return len(await asyncio.to_thread(self._names))


class LazyJetStream:
    """Publishes audit records once NATS answers; until then every publish fails at once.

    :meth:`start` begins connecting (retried without limit) and declaring the streams in the
    background; the webhook spools what it cannot publish meanwhile.
    """

    def __init__(self, url: str, nats_settings: NatsSettings, name: str = "mpijc-admission") -> None:
        self._url, self._settings, self._name = url, nats_settings, name
        self._task: asyncio.Task[Publisher] | None = None
        self._client: NATS | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._open())

    async def _open(self) -> Publisher:
        topology = Topology(self._settings.prefix)
        while True:
            try:
                nc = self._client = await connect(self._url, self._name, self._settings)
                break
            except Exception as exc:  # the client gave up on this round: start another
                log.warning("NATS not reachable yet (%s); records are spooled meanwhile", exc)
                await asyncio.sleep(1.0)
        js = nc.jetstream()
        while True:
            try:
                await ensure_streams(js, topology, self._settings)
                break
            except Exception as exc:  # NATS reachable but JetStream not ready (yet): keep trying
                log.warning("JetStream streams not declared yet: %s", exc)
                await asyncio.sleep(1.0)
        log.info("admission webhook connected to NATS")
        return Publisher(js, topology, self._settings.publish_retry_s)

    @property
    def ready(self) -> bool:
        """Connected and the streams declared: publishing is worth a try."""
        return self._task is not None and self._task.done() and not self._task.cancelled()

    async def __call__(self, records: Sequence[AuditRecord]) -> int:
        if self._task is None or not self._task.done():
            raise ConnectionError("not connected to NATS yet")
        return await self._task.result().publish_records(records)

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._client is not None:
            with contextlib.suppress(Exception):
                await disconnect(self._client)
