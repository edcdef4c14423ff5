"""A followed log's read hands over the data of every chunk that has arrived, across chunk
boundaries, decoding the chunked framing of one read of the connection at once
(:class:`~controller.kube.streams.ChunkedBody`): whatever the chunks and wherever the reads cut
them (in a size line, its CRLF, the data or the CRLF after it), what is handed over is the body,
byte for byte, and a read hands over all the data its bytes of the wire hold."""

from __future__ import annotations

import http.client
import itertools
import socket
import threading
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.kube.errors import APIUnavailableError
from controller.kube.gateway import NO_RETRIES, KubeGateway
from controller.kube.streams import ChunkedBody


class _Wire:
    """A connection's buffer that hands over the given pieces of the wire, one per read."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.reads = 0

    def read1(self, size: int = -1, /) -> bytes:
        self.reads += 1
        return self.pieces.pop(0) if self.pieces else b""


def _framed(chunks: list[bytes], extension: bool = False) -> bytes:
    ext = b";name=value" if extension else b""
    return b"".join(b"%x%s\r\n%s\r\n" % (len(c), ext, c) for c in chunks) + b"0\r\n\r\n"


def _cut(wire: bytes, at: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(at)), len(wire)]
    return [wire[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _read_all(body: ChunkedBody) -> Iterator[bytes]:
    while data := body.read(65536):
        yield data


def test_one_read_hands_over_every_chunk_it_holds() -> None:
    lines = [b"2026-11-26T06:34:01.000000000Z step %d\n" % i for i in range(5)]
    wire = _Wire([_framed(lines)])
    body = ChunkedBody(wire)
    assert body.read(65536) == b"".join(lines)
    assert body.read(65536) == b""
    assert wire.reads == 1


def test_lines_cut_at_chunk_boundaries_and_in_a_chunk_come_back_whole_in_order() -> None:
    chunks = [b"2026-11-26T06:34:01.000000000Z one\n2026-11-26T06:3", b"4:01.5Z two\n", b"three", b"\n"]
    wire = _framed(chunks, extension=True)
    # cut in a size line, in a data part, between a data part and its CRLF
    pieces = _cut(wire, [1, 20, len(wire) - 9, len(wire) - 4])
    got = list(_read_all(ChunkedBody(_Wire(pieces))))
    assert b"".join(got) == b"".join(chunks)
    assert len(got) <= len(pieces)


@settings(max_examples=300, deadline=None)
@given(
    chunks=st.lists(st.binary(min_size=1, max_size=40), max_size=12),
    cuts=st.lists(st.integers(min_value=1, max_value=600), max_size=20),
    extension=st.booleans(),
)
def test_any_chunks_cut_anywhere_are_the_body_byte_for_byte(
    chunks: list[bytes], cuts: list[int], extension: bool
) -> None:
    wire = _framed(chunks, extension)
    pieces = _cut(wire, [c for c in cuts if c < len(wire)])
    source = _Wire(pieces)
    got = list(_read_all(ChunkedBody(source)))
    assert b"".join(got) == b"".join(chunks)
    assert len(got) <= len(pieces)  # no read hands over less than the data its piece completes
    assert source.reads <= len(pieces)  # nothing read past the last chunk


def test_a_read_that_cut_a_chunk_or_its_framing_is_not_caught_up() -> None:
    body = ChunkedBody(_Wire([b"5\r\nhel", b"lo\r", b"\n3\r\nab\n\r\n", b"4", b"\r\nxyz\n\r\n"]))
    assert (body.read(65536), body.caught_up) == (b"hel", False)  # in a chunk's data
    assert (body.read(65536), body.caught_up) == (b"lo", False)  # its CRLF half read
    assert (body.read(65536), body.caught_up) == (b"ab\n", True)  # chunks whole
    assert (body.read(65536), body.caught_up) == (b"xyz\n", True)  # a size line cut, then whole


def test_a_connection_closed_before_the_last_chunk_is_an_incomplete_read() -> None:
    body = ChunkedBody(_Wire([b"5\r\nhel"]))
    assert body.read(65536) == b"hel"
    with pytest.raises(http.client.IncompleteRead):
        body.read(65536)


def test_a_size_that_is_not_hex_is_refused() -> None:
    with pytest.raises(http.client.IncompleteRead):
        ChunkedBody(_Wire([b"zz\r\nhello\r\n"])).read(65536)


def test_an_endless_size_line_is_refused() -> None:
    with pytest.raises(http.client.LineTooLong):
        ChunkedBody(_Wire([b"1" * 5000])).read(65536)


class _Server:
    """A one-request HTTP server that answers a followed log with the given wire bytes, the
    pieces sent one by one as the test says, then closes (or ends the body) as told."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.send = threading.Semaphore(0)
        self.pieces: list[bytes] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
            while True:
                self.send.acquire()
                if not self.pieces:
                    return  # closed without the last chunk: a broken connection
                conn.sendall(self.pieces.pop(0))

    def close(self) -> None:
        self.send.release()
        self.thread.join(5)
        self.listener.close()


def test_chunks_that_arrived_while_nobody_read_come_in_one_read_of_a_real_connection() -> None:
    server = _Server()
    lines = [b"2026-11-26T06:34:0%d.000000000Z line %d\n" % (i, i) for i in range(6)]
    try:
        with KubeGateway.for_url(server.url, retries=NO_RETRIES) as gateway:
            follow = gateway.follow_log("ns", "pod", "c")
            server.pieces.append(b"%x\r\n%s\r\n" % (len(lines[0]), lines[0]))
            server.send.release()
            assert follow.read() == lines[0]  # the request is sent and answered on the first read
            # five chunks, a line each, and a sixth cut in its middle as the connection breaks:
            # one write, so they have all arrived when the next read looks
            rest = b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines[1:])
            server.pieces.append(rest + b"9\r\n2026-11-2")
            server.send.release()
            assert follow.read() == b"".join(lines[1:]) + b"2026-11-2"
            server.send.release()  # the connection closes without the last chunk
            with pytest.raises(APIUnavailableError):
                follow.read()
            follow.close()
    finally:
        server.close()


def test_the_last_chunk_ends_a_real_follow() -> None:
    server = _Server()
    try:
        with KubeGateway.for_url(server.url, retries=NO_RETRIES) as gateway:
            follow = gateway.follow_log("ns", "pod", "c")
            server.pieces.append(_framed([b"a\n", b"b\n"]))
            server.send.release()
            got = b""
            while data := follow.read():
                got += data
            assert got == b"a\nb\n"
            follow.close()
    finally:
        server.close()
