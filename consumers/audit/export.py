"""Ship the audit chain to SIEMs: a JSON Lines file, syslog (RFC 5424 + CEF, TCP or TLS), Splunk HEC.

Every sink has a cursor in PostgreSQL (``audit_export_cursors``, keyed by the sink's name,
which names its kind and destination): the last ``seq`` it shipped. One export batch is one
transaction that locks the sink's cursor row (``FOR UPDATE SKIP LOCKED``: one exporter per
sink, however many replicas run), reads the records after it in chain order, sends them,
and moves the cursor. So an orderly restart resumes exactly where the last one stopped:
nothing twice, nothing skipped (the retention purge keeps what a cursor has not passed).

A crash between a send and its commit is the one window left. The JSON Lines sink closes it
itself: before each batch it reads the ``seq`` of the file's last complete line (dropping a
half-written one) and moves the cursor up to it. The network sinks cannot know what arrived,
so they may send that one batch again; every event carries ``seq`` and the record id
(``cn1``/``externalId`` in CEF) for the receiving side to drop repeats.

Every event also carries the chain's head (newest ``seq`` and ``hash``) when its batch was read:
a checkpoint outside the database, so records removed from the end of the chain are visible
against what the SIEM holds (``audit verify --against``).

An admission record is shipped with its verdict (:mod:`controller.store.corroboration`), so a
batch ends before the first admission record still waiting for one; it waits at most
:func:`verdict_wait` after it was chained (the corroboration window and three rounds of judging),
then goes out as ``pending``. The chain is not touched: the verdict travels beside the hashed link.

Formats are in :mod:`controller.store.auditformats`; the API's streaming export uses the same ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import ssl
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol

import httpx
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.backoff import Backoff
from controller.contract.clock import Clock, pause, utcnow
from controller.contract.credentials import tls_context
from controller.contract.settings import AuditSettings
from controller.metrics import MetricGroup
from controller.store.auditchain import (
    ChainHead,
    StoredRecord,
    chain_head,
    claim_cursor,
    move_cursor,
    records_after,
)
from controller.store.auditformats import hec_event, jsonl_line, octet_frame, syslog_message
from controller.store.corroboration import CorroborationVerdict, verdicts

__all__ = [
    "ExportError",
    "ExportMetrics",
    "FramedSink",
    "HecSink",
    "JsonlFileSink",
    "Sink",
    "SyslogSink",
    "drain",
    "export_batch",
    "run_exporter",
    "run_exporters",
    "sinks_from_settings",
    "verdict_wait",
]

log = logging.getLogger(__name__)


TAIL_BYTES = 1 << 20
"""How much of the JSON Lines file's end is read to find its last record (records are a few KiB)."""
BACKOFF_INITIAL_S = 0.5
_Verdict = CorroborationVerdict | None


class ExportError(Exception):
    """A sink refused a batch or cannot tell what it holds; the batch is retried after a backoff."""


class Sink(Protocol):
    """A destination of the audit chain."""

    @property
    def name(self) -> str:
        """The cursor key: kind and destination (a new destination starts from the beginning)."""
        ...

    async def send(
        self,
        batch: Sequence[StoredRecord],
        head: ChainHead | None = None,
        verdicts: Mapping[int, CorroborationVerdict] | None = None,
    ) -> None:
        """Deliver ``batch`` (in chain order) or raise; every record carries ``head``, the chain's
        newest link when the batch was read (a checkpoint the SIEM keeps), and an admission
        record its verdict from ``verdicts`` (by seq; ``pending`` when absent)."""
        ...

    async def delivered_upto(self) -> int | None:
        """The last seq the destination is known to hold, for sinks that can tell; else None."""
        ...

    async def close(self) -> None: ...


class FramedSink(ABC):
    """A sink that frames each record alone and delivers a batch as one byte string."""

    separator = b""
    """What stands between two framed records."""

    async def send(
        self,
        batch: Sequence[StoredRecord],
        head: ChainHead | None = None,
        verdicts: Mapping[int, CorroborationVerdict] | None = None,
    ) -> None:
        found = verdicts or {}
        await self._deliver(
            self.separator.join(self._frame(stored, head, found.get(stored.seq)) for stored in batch)
        )

    @abstractmethod
    def _frame(self, stored: StoredRecord, head: ChainHead | None, verdict: _Verdict) -> bytes:
        """One record as the destination takes it."""

    @abstractmethod
    async def _deliver(self, data: bytes) -> None:
        """Hand a batch's frames to the destination, or raise :class:`ExportError`."""


class JsonlFileSink(FramedSink):
    """Appends one canonical JSON line per record to a file, fsynced per batch."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def name(self) -> str:
        return f"jsonl:{self.path}"

    def _frame(self, stored: StoredRecord, head: ChainHead | None, verdict: _Verdict) -> bytes:
        return jsonl_line(stored, head, verdict)

    async def _deliver(self, data: bytes) -> None:
        await asyncio.to_thread(self._write, data)

    def _write(self, data: bytes) -> None:
        with self.path.open("ab") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())

    async def delivered_upto(self) -> int | None:
        return await asyncio.to_thread(self._last_seq)

    def _last_seq(self) -> int | None:
        """The seq of the last complete line; a half-written last line (a crash) is cut off."""
        if not self.path.exists():
            return None
        with self.path.open("r+b") as file:
            size = file.seek(0, os.SEEK_END)
            start = max(0, size - TAIL_BYTES)
            file.seek(start)
            tail = file.read()
            if tail and not tail.endswith(b"\n"):
                cut = tail.rfind(b"\n") + 1
                if cut == 0 and start > 0:
                    raise ExportError(f"{self.path}: last line is longer than {TAIL_BYTES} bytes")
                log.warning("%s: dropping a half-written last line (%d bytes)", self.path, len(tail) - cut)
                file.truncate(start + cut)
                tail = tail[:cut]
        lines = tail.splitlines()
        if not lines:
            return None
        try:
            return int(json.loads(lines[-1])["seq"])
        except (ValueError, KeyError, TypeError) as exc:
            raise ExportError(f"{self.path}: last line is not an exported audit record: {exc}") from exc

    async def close(self) -> None:
        return None


class SyslogSink(FramedSink):
    """RFC 5424 messages with a CEF payload over one TCP (or TLS) connection, octet-counted."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        hostname: str,
        facility: int = 13,
        tls: ssl.SSLContext | None = None,
        timeout_s: float = 10.0,
    ) -> None:
        self.host, self.port = host, port
        self.hostname, self.facility = hostname, facility
        self.tls, self.timeout_s = tls, timeout_s
        self._stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    @property
    def name(self) -> str:
        return f"syslog:{self.host}:{self.port}"

    async def _connected(self) -> asyncio.StreamWriter:
        if self._stream is not None and self._stream[0].at_eof():  # the receiver hung up
            await self.close()
        if self._stream is None:
            self._stream = await asyncio.wait_for(
                asyncio.open_connection(
                    self.host, self.port, ssl=self.tls, server_hostname=self.host if self.tls else None
                ),
                self.timeout_s,
            )
        return self._stream[1]

    def _frame(self, stored: StoredRecord, head: ChainHead | None, verdict: _Verdict) -> bytes:
        return octet_frame(syslog_message(stored, self.hostname, self.facility, head=head, verdict=verdict))

    async def _deliver(self, data: bytes) -> None:
        try:
            writer = await self._connected()
            writer.write(data)
            await asyncio.wait_for(writer.drain(), self.timeout_s)
        except (OSError, TimeoutError) as exc:
            await self.close()
            raise ExportError(f"{self.name}: {type(exc).__name__}: {exc}") from exc

    async def delivered_upto(self) -> int | None:
        return None

    async def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream[1].close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await stream[1].wait_closed()


class HecSink(FramedSink):
    """Batches of JSON events to a Splunk-HEC-compatible ``/services/collector/event``."""

    separator = b"\n"

    def __init__(
        self,
        url: str,
        token: str,
        *,
        host: str,
        sourcetype: str,
        index: str | None = None,
        verify: ssl.SSLContext | bool = True,
        timeout_s: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.host, self.sourcetype, self.index = host, sourcetype, index
        self._headers = {"Authorization": f"Splunk {token}", "Content-Type": "application/json"}
        self._client = httpx.AsyncClient(verify=verify, timeout=timeout_s)

    @property
    def name(self) -> str:
        return f"hec:{self.url}"

    def _frame(self, stored: StoredRecord, head: ChainHead | None, verdict: _Verdict) -> bytes:
        return json.dumps(hec_event(stored, self.host, self.sourcetype, self.index, head, verdict)).encode()

    async def _deliver(self, data: bytes) -> None:
        try:
            response = await self._client.post(
                f"{self.url}/services/collector/event", content=data, headers=self._headers
            )
        except httpx.HTTPError as exc:
            raise ExportError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
        if response.status_code != 200:
            raise ExportError(f"{self.name}: HTTP {response.status_code}: {response.text[:300]}")

    async def delivered_upto(self) -> int | None:
        return None

    async def close(self) -> None:
        await self._client.aclose()


def sinks_from_settings(settings: AuditSettings, hostname: str | None = None) -> list[Sink]:
    """One sink per configured destination."""
    host = hostname or socket.gethostname()
    sinks: list[Sink] = []
    if settings.jsonl_path is not None:
        sinks.append(JsonlFileSink(settings.jsonl_path))
    if settings.syslog_address is not None:
        address, sep, port = settings.syslog_address.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"audit.syslog_address must be host:port, not {settings.syslog_address!r}")
        tls = tls_context(settings.syslog_ca_file) if settings.syslog_tls else None
        sinks.append(
            SyslogSink(
                address.strip("[]"), int(port), hostname=host, facility=settings.syslog_facility, tls=tls
            )
        )
    if settings.hec_url is not None:
        if settings.hec_token is None:
            raise ValueError("audit.hec_url is set but audit.hec_token is not")
        sinks.append(
            HecSink(
                settings.hec_url,
                settings.hec_token.get_secret_value(),
                host=host,
                sourcetype=settings.hec_sourcetype,
                index=settings.hec_index,
                verify=tls_context(settings.hec_ca_file),
            )
        )
    return sinks


class ExportMetrics(MetricGroup):
    """The exporters' series."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self.exported = Counter(
            "mpijc_audit_exported", "Audit records shipped, by sink.", ["sink"], registry=self.registry
        )
        self.failures = Counter(
            "mpijc_audit_export_failures",
            "Export batches that failed and wait for a retry, by sink.",
            ["sink"],
            registry=self.registry,
        )


def verdict_wait(settings: AuditSettings) -> timedelta:
    """How long after it was chained an admission record may wait for its verdict before it is
    shipped as ``pending``: the corroboration window and three rounds of judging."""
    return timedelta(seconds=settings.corroboration_window_s + 3 * settings.corroboration_interval_s)


def _ready(
    batch: Sequence[StoredRecord], found: Mapping[int, CorroborationVerdict], now: datetime, wait: timedelta
) -> Sequence[StoredRecord]:
    """``batch`` up to the first admission record still waiting for its verdict."""
    for i, stored in enumerate(batch):
        if (
            stored.record.source == "admission"
            and stored.seq not in found
            and stored.recorded_at > now - wait
        ):
            return batch[:i]
    return batch


async def export_batch(
    engine: AsyncEngine,
    sink: Sink,
    batch_size: int,
    clock: Clock = utcnow,
    wait: timedelta = timedelta(0),
) -> int:
    """Ship the next batch after ``sink``'s cursor and move the cursor; returns how many were shipped.

    The batch ends before the first admission record without a verdict chained less than ``wait``
    ago (:func:`verdict_wait`). Returns 0 when there is nothing (ready), or when another exporter
    holds this sink's cursor.
    """
    async with engine.begin() as conn:
        held = await claim_cursor(conn, sink.name)
        if held is None:
            return 0
        delivered = await sink.delivered_upto()
        if delivered is not None and delivered > held:
            log.info("%s already holds records up to seq %d (cursor was at %d)", sink.name, delivered, held)
            await move_cursor(conn, sink.name, delivered, 0, clock())
            held = delivered
        batch = await records_after(conn, held, batch_size)
        found = await verdicts(conn, [s.seq for s in batch if s.record.source == "admission"])
        ready = _ready(batch, found, clock(), wait)
        if not ready:
            return 0
        await sink.send(ready, await chain_head(conn), found)
        await move_cursor(conn, sink.name, ready[-1].seq, len(ready), clock())
    return len(ready)


async def drain(
    engine: AsyncEngine,
    sink: Sink,
    batch_size: int,
    clock: Clock = utcnow,
    wait: timedelta = timedelta(0),
) -> int:
    """Ship batches until ``sink`` has caught up with the chain, or reached an admission record
    waiting for its verdict (see :func:`export_batch`); returns how many were shipped."""
    total = 0
    while shipped := await export_batch(engine, sink, batch_size, clock, wait):
        total += shipped
    return total


async def run_exporter(
    engine: AsyncEngine,
    sink: Sink,
    settings: AuditSettings,
    stop: asyncio.Event,
    metrics: ExportMetrics,
    clock: Clock = utcnow,
) -> None:
    """Keep ``sink`` caught up until ``stop`` is set, retrying failed batches with backoff; closes it."""
    backoff = Backoff(BACKOFF_INITIAL_S, settings.export_backoff_max_s)
    try:
        while not stop.is_set():
            try:
                shipped = await export_batch(
                    engine, sink, settings.export_batch_size, clock, verdict_wait(settings)
                )
            except Exception as exc:
                metrics.failures.labels(sink.name).inc()
                delay = backoff.next_delay()
                log.warning("export to %s failed, retrying in %.1fs: %s", sink.name, delay, exc)
                await pause(stop, delay)
                continue
            backoff.reset()
            metrics.exported.labels(sink.name).inc(shipped)
            if shipped < settings.export_batch_size:
                await pause(stop, settings.export_poll_s)
    finally:
        await sink.close()


async def run_exporters(
    engine: AsyncEngine,
    settings: AuditSettings,
    stop: asyncio.Event,
    registry: CollectorRegistry,
    clock: Clock = utcnow,
) -> None:
    """One :func:`run_exporter` per configured sink until ``stop`` is set (none configured: returns)."""
    sinks = sinks_from_settings(settings)
    if not sinks:
        return
    metrics = ExportMetrics.on(registry)
    log.info("audit exporters: %s", ", ".join(sink.name for sink in sinks))
    async with asyncio.TaskGroup() as group:
        for sink in sinks:
            group.create_task(run_exporter(engine, sink, settings, stop, metrics, clock))
