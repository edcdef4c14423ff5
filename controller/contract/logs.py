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

import functools
import re
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field

from controller.contract.kinds import JobKind
from controller.contract.message import Message
from controller.contract.redaction import REDACTED, scrub

__all__ = [
    "LineSplitter",
    "LogBatch",
    "LogLine",
    "LogPosition",
    "Resume",
    "clean",
    "clean_lines",
    "format_ns",
    "parse_ns",
    "rank_of",
    "since_time",
    "split_timestamp",
]

SCHEMA_VERSION: Literal[1] = 1

_RANK = re.compile(rb"\[(?:\d+,(\d+)\]<std(?:out|err)>:|rank(\d+)\]:|[a-z_]*?(\d+)\]:)")
"""``[jobid,rank]<stdout>:``, ``[rankN]:``, ``[defaultN]:`` (torchrun's role and local rank)."""
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")
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
    kind: JobKind | None = None
    """The run's kind (what names a run on the bus beside its uid); None from an older follower."""
    namespace: str
    job: str
    pod: str
    pod_uid: str | None = None
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
    seconds = _epoch_seconds(matched[1], matched[3])
    if seconds is None:
        return None
    return seconds * 1_000_000_000 + int((matched[2] or "").ljust(9, "0"))


@functools.lru_cache(maxsize=4096)  # the lines of one second share it
def _epoch_seconds(seconds: str, zone: str) -> int | None:
    try:
        return int(datetime.fromisoformat(seconds + ("+00:00" if zone == "Z" else zone)).timestamp())
    except ValueError:
        return None


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
    matched = _RANK.match(line) if line[:1] == b"[" else None
    if matched is None:
        return None
    return int(next(group for group in matched.groups() if group is not None))


def clean(line: bytes) -> str:
    """The text kept of a line: invalid UTF-8 replaced, NUL bytes removed, secrets redacted."""
    return scrub(_decoded(line)) or ""


def clean_lines(lines: Sequence[bytes]) -> list[str]:
    """:func:`clean` of each line, scrubbed together in one pass over their text (what costs is
    looking for secrets, once per call); line by line when a secret spanned lines."""
    decoded = [_decoded(line) for line in lines]
    scrubbed = (scrub("\n".join(decoded)) or "").split("\n") if decoded else []
    if len(scrubbed) != len(decoded):  # a private key block across lines became one [REDACTED]
        return _line_by_line(decoded)
    return scrubbed


def _line_by_line(decoded: list[str]) -> list[str]:
    """Each line scrubbed alone, every line of a private key block (BEGIN to END) redacted whole."""
    out: list[str] = []
    inside = False
    for text in decoded:
        if inside:
            out.append(REDACTED)
            inside = _KEY_END.search(text) is None
            continue
        inside = _KEY_BEGIN.search(text) is not None and _KEY_END.search(text) is None
        out.append(scrub(text) or "")
    return out


def _decoded(line: bytes) -> str:
    return line.replace(b"\x00", b"").decode("utf-8", errors="replace").rstrip("\r")


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
        *whole, rest = chunk.split(b"\n")
        for piece in whole:
            if not self._pending and not self._dropped and len(piece) <= self._max:
                yield piece  # the common case: a line whole in one read
            else:
                self._add(piece)
                yield self._take()
        self._add(rest)

    def _add(self, piece: bytes) -> None:
        room = max(self._max - len(self._pending), 0)
        self._pending += piece[:room]
        self._dropped += max(len(piece) - room, 0)

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
