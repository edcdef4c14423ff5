"""Container log lines as the followers store them on ``LOGS``: bounded, cleaned, timestamped,
labelled with the rank that printed them, and batched per container.

A followed container's log arrives as the kubelet serves it with ``timestamps=true``: one
RFC 3339 timestamp with nanoseconds, a space, the line. What may arrive is anything a program
prints, so every line is bounded before it is kept (:class:`LineSplitter`: at most
``max_line_bytes``, the rest of a longer line counted and dropped, with a marker saying how
much), decoded with invalid UTF-8 replaced, stripped of NUL bytes, and passed through the
redaction every republished text gets (:func:`controller.contract.redaction.scrub`).

Where a stream resumes (:class:`LogPosition`) is the last line stored: its timestamp in
nanoseconds and how many lines of that same timestamp were stored before it. The kubelet's
``sinceTime`` is whole seconds, so a resumed stream repeats the lines of that second;
:class:`Resume` drops what was already stored (no duplicate) and keeps the first line after it
(no gap), also when several lines share one timestamp.

The rank of a line is read from the prefixes launchers and launchers' tools put before it:
Open MPI's ``--tag-output`` (``[1,3]<stdout>:``), PyTorch's ``[rank3]:`` and torchrun's
``--tee``/``--log-line-prefix-template`` default (``[default3]:``, the local rank).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from controller.contract.message import Message
from controller.contract.redaction import scrub

__all__ = [
    "LineSplitter",
    "LogBatch",
    "LogLine",
    "LogPosition",
    "Resume",
    "clean",
    "format_ns",
    "parse_ns",
    "rank_of",
    "since_time",
    "split_timestamp",
]

SCHEMA_VERSION: Literal[1] = 1

_RANK = re.compile(rb"\[(?:\d+,(\d+)\]<std(?:out|err)>:|rank(\d+)\]:|[a-z_]*?(\d+)\]:)")
"""``[jobid,rank]<stdout>:``, ``[rankN]:``, ``[defaultN]:`` (torchrun's role and local rank)."""
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")


class LogLine(Message):
    """One line: when the kubelet saw it, the rank that printed it (when it says), its text."""

    ts: int = Field(description="Nanoseconds since the epoch, from the kubelet's timestamp.")
    rank: int | None = None
    text: str


class LogPosition(Message):
    """How far a container's log is stored: its last line's timestamp, the lines stored with that
    very timestamp, and the bytes of text stored so far (what the per-run cap counts)."""

    ts: int = 0
    ties: int = 0
    stored_bytes: int = 0
    capped: bool = False
    """The run reached its byte cap: nothing more is followed."""


class LogBatch(Message):
    """Lines of one container, in the order it wrote them, and the position they bring it to."""

    schema_version: Literal[1] = SCHEMA_VERSION
    run_uid: str
    namespace: str
    job: str
    pod: str
    container: str
    role: Literal["launcher", "worker"] | None = None
    index: int | None = None
    lines: tuple[LogLine, ...] = ()
    position: LogPosition
    note: str | None = None
    """Said once, where lines were left out (the run's byte cap reached)."""

    @property
    def msg_id(self) -> str:
        """The batch published again after a lost ack (same container, same end) is stored once."""
        end = self.position
        return f"{self.run_uid}:{self.pod}:{self.container}:{end.ts}:{end.ties}:{int(end.capped)}"


def parse_ns(stamp: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp (``None``: not one)."""
    matched = _STAMP.fullmatch(stamp)
    if matched is None:
        return None
    try:
        seconds = datetime.fromisoformat(matched[1] + ("+00:00" if matched[3] == "Z" else matched[3]))
    except ValueError:
        return None
    fraction = (matched[2] or "").ljust(9, "0")
    return int(seconds.timestamp()) * 1_000_000_000 + int(fraction)


def format_ns(ns: int) -> str:
    """``2026-11-26T06:34:01.123456789Z`` of nanoseconds since the epoch."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{fraction:09d}Z"


def since_time(ns: int) -> str:
    """The ``sinceTime`` to resume at ``ns`` with: its whole second (the API's resolution)."""
    return datetime.fromtimestamp(ns // 1_000_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def split_timestamp(line: bytes) -> tuple[int | None, bytes]:
    """The kubelet's timestamp of a ``timestamps=true`` line, and the line after it."""
    stamp, _, rest = line.partition(b" ")
    return parse_ns(stamp.decode("ascii", errors="replace")), rest


def rank_of(line: bytes) -> int | None:
    """The rank a line's prefix names (see the module), if any."""
    matched = _RANK.match(line)
    if matched is None:
        return None
    return int(next(group for group in matched.groups() if group is not None))


def clean(line: bytes) -> str:
    """The text kept of a line: invalid UTF-8 replaced, NUL bytes removed, secrets redacted."""
    return scrub(line.replace(b"\x00", b"").decode("utf-8", errors="replace").rstrip("\r")) or ""


class LineSplitter:
    """Splits a byte stream into lines of at most ``max_line_bytes``; holds no more than that.

    A longer line keeps its first ``max_line_bytes`` and ends with a marker naming how many
    bytes were dropped; what arrives of it meanwhile is only counted."""

    def __init__(self, max_line_bytes: int) -> None:
        self._max = max_line_bytes
        self._pending = bytearray()
        self._dropped = 0

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        """The lines ``chunk`` completes (without their newline)."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            room = self._max - len(self._pending)
            self._pending += piece[: max(room, 0)]
            self._dropped += max(len(piece) - max(room, 0), 0)
            if end < 0:
                return
            yield self._take()
            start = end + 1

    def finish(self) -> Iterator[bytes]:
        """The last line of a stream that ended cleanly without a newline (none when empty)."""
        if self._pending or self._dropped:
            yield self._take()

    def discard(self) -> None:
        """Forget a partial line (the stream broke: it comes again whole after resuming)."""
        self._pending.clear()
        self._dropped = 0

    def _take(self) -> bytes:
        line = bytes(self._pending)
        if self._dropped:
            line += b" [... %d bytes of this line dropped]" % self._dropped
        self.discard()
        return line


class Resume:
    """Drops the lines a resumed stream repeats: those up to ``position``, then lets all pass."""

    def __init__(self, position: LogPosition) -> None:
        self._ts = position.ts
        self._ties = position.ties
        self._caught_up = position.ts == 0

    def admit(self, ts: int) -> bool:
        """Whether the line stamped ``ts`` is new."""
        if self._caught_up:
            return True
        if ts < self._ts:
            return False
        if ts == self._ts and self._ties > 0:
            self._ties -= 1
            return False
        self._caught_up = True
        return True
