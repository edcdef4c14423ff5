"""Exporters against real receivers on loopback: exact framing and content, and a restart that
resumes from the cursor in PostgreSQL without sending anything twice or skipping anything."""

from __future__ import annotations

import asyncio
import json
import re
import ssl
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Self

import h11
import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.audit.export import (
    ExportError,
    ExportMetrics,
    HecSink,
    JsonlFileSink,
    Sink,
    SyslogSink,
    drain,
    run_exporter,
    sinks_from_settings,
    verdict_wait,
)
from controller.contract.settings import AuditSettings
from controller.store import corroboration
from controller.store.auditchain import ChainHead, StoredRecord, export_cursors
from controller.store.auditformats import hec_event, jsonl_line, octet_frame, syslog_message
from controller.store.auditverification import compare_with_export, verify
from tests.audit_helpers import T0, audit_record, make_certificate, parse_cef, parse_syslog, write

HOST = "ctrl-0"


class LoopbackServer:
    """A TCP (or TLS) server on a free loopback port while inside; subclasses handle connections."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.tls)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


class SyslogReceiver(LoopbackServer):
    """A TCP (or TLS) syslog listener that keeps every byte of every connection."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(tls)
        self.connections: list[bytearray] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received = bytearray()
        self.connections.append(received)
        while data := await reader.read(65536):
            received += data
        writer.close()

    def frames(self) -> list[bytes]:
        """Every message, parsed by strict octet counting (RFC 6587 §3.4.1) per connection."""
        messages: list[bytes] = []
        for received in self.connections:
            rest = bytes(received)
            while rest:
                length, space, rest = rest.partition(b" ")
                assert space and re.fullmatch(rb"[1-9][0-9]*", length), f"bad frame header {length[:20]!r}"
                if len(rest) < int(length):
                    break  # still arriving
                messages.append(rest[: int(length)])
                rest = rest[int(length) :]
        return messages

    def seqs(self) -> list[int]:
        return [int(re.search(rb" cn1=(\d+)", frame).group(1)) for frame in self.frames()]  # type: ignore[union-attr]


class HecReceiver(LoopbackServer):
    """An HTTP/1.1 collector that answers with the statuses it is given (then 200s) and keeps each request."""

    def __init__(self, statuses: Sequence[int] = ()) -> None:
        super().__init__()
        self.statuses = list(statuses)
        self.requests: list[tuple[str, str, dict[str, str], bytes, int]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request, body = None, b""
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(await reader.read(65536))
                    elif isinstance(event, h11.Request):
                        request = event
                    elif isinstance(event, h11.Data):
                        body += event.data
                    elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
                        break
                if request is None:
                    return
                status = self.statuses.pop(0) if self.statuses else 200
                headers = {k.decode(): v.decode() for k, v in request.headers}
                self.requests.append(
                    (request.method.decode(), request.target.decode(), headers, body, status)
                )
                answer = json.dumps(
                    {"text": "Success", "code": 0} if status == 200 else {"text": "Server is busy", "code": 9}
                ).encode()
                writer.write(
                    conn.send(
                        h11.Response(status_code=status, headers=[("content-length", str(len(answer)))])
                    )
                    + conn.send(h11.Data(data=answer))
                    + conn.send(h11.EndOfMessage())
                )
                await writer.drain()
                conn.start_next_cycle()
        finally:
            writer.close()

    def accepted_seqs(self) -> list[int]:
        return [
            json.loads(line)["event"]["seq"]
            for _, _, _, body, status in self.requests
            if status == 200
            for line in body.splitlines()
        ]


async def chain(engine: AsyncEngine, numbers: Sequence[int]) -> list[StoredRecord]:
    return await write(engine, [audit_record(n, reason="quota=8 GPUs\\node") for n in numbers], T0)


def head(stored: StoredRecord) -> ChainHead:
    """The chain head an export of a batch carries, when ``stored`` is the newest link."""
    return ChainHead(stored.seq, stored.hash)


async def until(condition: Callable[[], bool], what: Callable[[], object] = str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not reached: {what()}")


def settings(**fields: object) -> AuditSettings:
    return AuditSettings.model_validate({"export_poll_s": 0.02, "export_batch_size": 2, **fields})


@pytest.fixture
async def syslog() -> AsyncIterator[SyslogReceiver]:
    async with SyslogReceiver() as receiver:
        yield receiver


async def run_for_a_while(
    engine: AsyncEngine, sink: SyslogSink, receiver: SyslogReceiver, expected: list[int]
) -> None:
    """Run one exporter until the receiver has ``expected``, then stop it in order (a restart)."""
    stop = asyncio.Event()
    task = asyncio.create_task(
        run_exporter(engine, sink, settings(), stop, ExportMetrics(CollectorRegistry()))
    )
    await until(lambda: receiver.seqs() == expected, receiver.seqs)
    stop.set()
    await task


async def test_syslog_frames_are_exact_and_a_restart_resumes(
    engine: AsyncEngine, syslog: SyslogReceiver
) -> None:
    first = await chain(engine, [1, 2, 3])
    await run_for_a_while(engine, SyslogSink("127.0.0.1", syslog.port, hostname=HOST), syslog, [1, 2, 3])

    later = await chain(engine, [4, 5])
    await run_for_a_while(
        engine, SyslogSink("127.0.0.1", syslog.port, hostname=HOST), syslog, [1, 2, 3, 4, 5]
    )

    assert len(syslog.connections) == 2, "one connection per exporter run"
    assert bytes(syslog.connections[0]) == b"".join(
        octet_frame(syslog_message(s, HOST, head=head(first[-1]))) for s in first
    )
    assert bytes(syslog.connections[1]) == b"".join(
        octet_frame(syslog_message(s, HOST, head=head(later[-1]))) for s in later
    )
    frame = syslog.frames()[0]
    assert frame.startswith(
        b"<110>1 2026-11-23T09:01:00.000000Z ctrl-0 mpijob-controller - job-create - CEF:0|"
    )
    assert b"|job-create|MPIJob created|3|" in frame
    assert b" reason=quota\\=8 GPUs\\\\node suser=alice@example.com " in frame
    async with engine.connect() as conn:
        assert (await export_cursors(conn)) == {f"syslog:127.0.0.1:{syslog.port}": 5}


async def test_syslog_over_tls(engine: AsyncEngine, tmp_path: Path) -> None:
    certificate = make_certificate(tmp_path)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(certificate.cert, certificate.key)
    stored = await chain(engine, [1, 2, 3])
    async with SyslogReceiver(tls=server) as receiver:
        (sink,) = sinks_from_settings(
            settings(
                syslog_address=f"localhost:{receiver.port}", syslog_tls=True, syslog_ca_file=certificate.cert
            ),
            hostname=HOST,
        )
        assert await drain(engine, sink, 2) == 3
        await sink.close()
        await until(lambda: len(receiver.frames()) == 3, receiver.frames)
    assert receiver.frames() == [syslog_message(s, HOST, head=head(stored[-1])) for s in stored]


async def test_syslog_refused_connection_moves_nothing(engine: AsyncEngine) -> None:
    await chain(engine, [1])
    async with SyslogReceiver() as receiver:
        port = receiver.port
    sink = SyslogSink("127.0.0.1", port, hostname=HOST, timeout_s=2)
    with pytest.raises(ExportError, match=re.escape(f"syslog:127.0.0.1:{port}: ")):
        await drain(engine, sink, 10)
    async with engine.connect() as conn:
        assert (await export_cursors(conn)).get(f"syslog:127.0.0.1:{port}", 0) == 0


async def test_hec_batches_with_the_token_and_retries_a_busy_collector(engine: AsyncEngine) -> None:
    stored = await chain(engine, [1, 2, 3])
    async with HecReceiver(statuses=[503]) as collector:
        sink = HecSink(
            collector.url, "s3cr3t-t0ken", host=HOST, sourcetype="mpijob-controller:audit", index="k8s"
        )
        with pytest.raises(ExportError, match=r"HTTP 503: .*Server is busy"):
            await drain(engine, sink, 2)
        assert await drain(engine, sink, 2) == 3  # a restart would do the same: the cursor did not move
        await sink.close()

    assert collector.accepted_seqs() == [1, 2, 3]
    method, target, headers, body, _ = collector.requests[1]
    assert (method, target) == ("POST", "/services/collector/event")
    assert headers["authorization"] == "Splunk s3cr3t-t0ken"
    assert headers["content-type"] == "application/json"
    assert [json.loads(line) for line in body.splitlines()] == [
        json.loads(json.dumps(hec_event(s, HOST, "mpijob-controller:audit", "k8s", head(stored[-1]))))
        for s in stored[:2]
    ]


async def test_jsonl_file_resumes_after_a_crash_without_duplicates(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    path = tmp_path / "audit.jsonl"
    await chain(engine, [1, 2, 3])
    assert await drain(engine, JsonlFileSink(path), 2) == 3

    later = await chain(engine, [4, 5, 6])
    # a crash: records 4 and 5 were written, the cursor never moved, record 6 was half written
    await JsonlFileSink(path).send(later[:2])
    with path.open("ab") as file:
        file.write(jsonl_line(later[2])[:40])

    assert await drain(engine, JsonlFileSink(path), 2) == 1
    lines = path.read_bytes().splitlines(keepends=True)
    assert [json.loads(line)["seq"] for line in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[-1] == jsonl_line(later[2], head(later[2]))
    async with engine.connect() as conn:
        assert (await export_cursors(conn)) == {f"jsonl:{path}": 6}


async def test_two_exporters_of_one_sink_take_turns(engine: AsyncEngine, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    await chain(engine, range(1, 41))
    shipped = await asyncio.gather(*(drain(engine, JsonlFileSink(path), 3) for _ in range(3)))
    assert sum(shipped) == 40
    assert [json.loads(line)["seq"] for line in path.read_bytes().splitlines()] == list(range(1, 41))


async def test_admission_records_wait_for_their_verdict_and_ship_with_it_in_every_format(
    engine: AsyncEngine, syslog: SyslogReceiver, tmp_path: Path
) -> None:
    """The exporters hold an admission record until it is judged (at most ``verdict_wait``), then
    every sink carries its caller and verdict; the SIEM's copy still verifies against the chain."""
    config = settings(corroboration_window_s=120, corroboration_interval_s=5)
    wait = verdict_wait(config)
    assert wait == timedelta(seconds=135)
    forged = audit_record(1, at=T0, verb="delete").model_copy(update={"caller": "unverified"})
    lifecycle = audit_record(2, at=T0, verb="failed")
    unjudged = audit_record(3, at=T0 + timedelta(minutes=1), verb="create").model_copy(
        update={"caller": "mtls"}
    )
    stored = await write(engine, [forged, lifecycle], T0)
    stored += await write(engine, [unjudged], T0 + timedelta(minutes=1))
    path = tmp_path / "siem.jsonl"
    async with HecReceiver() as collector:
        sinks: list[Sink] = [
            JsonlFileSink(path),
            SyslogSink("127.0.0.1", syslog.port, hostname=HOST),
            HecSink(collector.url, "t", host=HOST, sourcetype="mpijob-controller:audit"),
        ]
        early = T0 + timedelta(seconds=10)
        for sink in sinks:
            assert await drain(engine, sink, 10, lambda: early, wait) == 0, (
                "the first record is not judged yet"
            )

        async with engine.begin() as conn:  # the window has passed: no deletion was seen
            decided = await corroboration.decide(
                conn, T0 + timedelta(minutes=2, seconds=1), timedelta(minutes=2)
            )
        assert [d.status for d in decided] == ["unmatched"], "only the record chained first is due"
        for sink in sinks:
            assert await drain(engine, sink, 10, lambda: early, wait) == 2, "up to the unjudged one"
        late = T0 + timedelta(minutes=1) + wait + timedelta(seconds=1)
        for sink in sinks:
            assert await drain(engine, sink, 10, lambda: late, wait) == 1, "waited long enough: pending"
            await sink.close()
        await until(lambda: len(syslog.frames()) == 3, syslog.frames)

    expected = [("unverified", "unmatched"), (None, None), ("mtls", "pending")]
    shipped = []
    for frame in syslog.frames():
        _, severity, _, text = parse_syslog(frame)
        pairs = parse_cef(text)[1]
        shipped.append((pairs.get("flexString2"), pairs.get("cat"), severity))
    assert shipped == [("unverified", "unmatched", 4), (None, None, 4), ("mtls", "pending", 6)]
    events = [json.loads(line) for *_, body, _ in collector.requests for line in body.splitlines()]
    assert [
        (e.get("fields", {}).get("caller"), e.get("fields", {}).get("corroboration")) for e in events
    ] == expected
    lines = path.read_bytes().splitlines()
    file_links = [json.loads(line) for line in lines]
    assert [
        (f["record"].get("caller"), f.get("corroboration", {}).get("status")) for f in file_links
    ] == expected
    assert "did not see MPIJob team-a/job-1 (uid uid-1) deleted" in file_links[0]["corroboration"]["detail"]
    assert [e["event"] for e in events] == [
        {k: v for k, v in link.items() if k != "head"} for link in file_links
    ], "HEC carries the same link and verdict"
    assert (await verify(engine)).ok
    compared = await compare_with_export(engine, lines)
    assert compared.ok, compared.describe()
    assert [link["hash"] for link in file_links] == [s.hash for s in stored]


def test_sinks_follow_the_settings(tmp_path: Path) -> None:
    sinks = sinks_from_settings(
        settings(
            jsonl_path=tmp_path / "a.jsonl",
            syslog_address="siem.example.com:6514",
            hec_url="https://splunk:8088/",
            hec_token="t",
        ),
        hostname=HOST,
    )
    assert [s.name for s in sinks] == [
        f"jsonl:{tmp_path / 'a.jsonl'}",
        "syslog:siem.example.com:6514",
        "hec:https://splunk:8088",
    ]
    with pytest.raises(ValueError, match="host:port"):
        sinks_from_settings(settings(syslog_address="siem.example.com"))
    with pytest.raises(ValueError, match="hec_token"):
        sinks_from_settings(settings(hec_url="https://splunk:8088"))
