"""Container log lines as the followers store them on ``LOGS``: bounded, cleaned, timestamped,
labelled with the rank that printed them, and batched per container.

A followed container's log arrives as the kubelet serves it with ``timestamps=true``: one
RFC 3339 timestamp with nanoseconds, a space, the line. What may arrive is anything a program
prints, so every line is bounded before it is kept (:class:`LineSplitter`: at most
``max_line_bytes``, the rest of a longer line counted and dropped, with a marker saying how
much), decoded with invalid UTF-8 replaced, stripped of NUL bytes, and passed through the
redaction every republished text gets (:func:`controller.contract.redaction.scrub`). A private
key block is redacted whole from its ``BEGIN`` line through its ``END`` line also where it
spans reads, batches or a resumed stream: the position says how many lines of an open block
were stored (:attr:`LogPosition.key_lines`).

What arrives in one read is handled as one text wherever that is the same (decoding, control
characters, the search for secrets: :func:`decode_lines`, :func:`redact_lines`); what is left
per line is its timestamp (:func:`read_lines`: a second's epoch computed once, a prefix's rank read once).
A batch is kept as the JSON objects its lines are stored as (:class:`PackedBatch`): a
:class:`LogLine` model per line would cost more than everything else a line costs.

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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field
from pydantic_core import to_json

from controller.contract.kinds import JobKind
from controller.contract.message import Message
from controller.contract.redaction import REDACTED, clean_controls, redact, scrub

__all__ = [
    "LineSplitter",
    "LogBatch",
    "LogLine",
    "LogPosition",
    "PackedBatch",
    "Resume",
    "clean",
    "clean_lines",
    "decode_lines",
    "format_ns",
    "parse_ns",
    "rank_of",
    "read_lines",
    "redact_lines",
    "since_time",
]

SCHEMA_VERSION: Literal[1] = 1

_RANK_PATTERN = r"\[(?:\d+,(\d+)\]<std(?:out|err)>:|rank(\d+)\]:|[a-z_]*?(\d+)\]:)"
"""``[jobid,rank]<stdout>:``, ``[rankN]:``, ``[defaultN]:`` (torchrun's role and local rank)."""
_RANK = re.compile(_RANK_PATTERN.encode())
_RANK_TEXT = re.compile(_RANK_PATTERN)
_RANKS: dict[str, int | None] = {}
"""The rank of each prefix seen (up to its first ``:``): lines of one launcher share a few."""
_RANKS_MAX = 4096
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")
KEY_BLOCK_MAX_LINES = 1000
"""Lines redacted after a private key's ``BEGIN`` line when no ``END`` line comes (an RSA key of
16,384 bits is about 150 lines of PEM): a block left open does not hide the rest of a log."""
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")
_SECONDS: dict[str, int] = {}
"""Epoch seconds of each ``YYYY-MM-DDTHH:MM:SS`` of a UTC (``Z``) stamp read (the fast path)."""
_SECONDS_MAX = 4096
_SCALE = (0, *(10 ** (9 - n) for n in range(1, 10)))
"""Nanoseconds per unit of a fraction of n digits."""
_PLAIN = bytes(range(0x20, 0x7F)) + b"\t\n"
"""Bytes that need neither decoding with replacement nor cleaning."""
_TRAILING_CR = re.compile(rb"\r+(?=\n)|\r+\Z")


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
    key_lines: int = 0
    """Lines of a private key block stored up to here (its ``BEGIN`` line included) whose ``END``
    line has not come: the lines after are redacted up to it (0: no block open)."""


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


@dataclass(frozen=True, slots=True)
class PackedBatch:
    """A :class:`LogBatch` as a follower publishes it: ``head`` says all but the lines (``lines``
    empty), ``lines`` are the objects its ``lines`` are stored as (``ts``, ``rank`` when known,
    ``text``)."""

    head: LogBatch
    lines: list[dict[str, int | str]]

    def payload(self) -> bytes:
        """The batch's JSON, as :meth:`LogBatch.model_dump_json` (``exclude_defaults``) writes it."""
        return to_json({**self.head.model_dump(mode="json", exclude_defaults=True), "lines": self.lines})


def parse_ns(stamp: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp (``None``: not one)."""
    matched = _STAMP.fullmatch(stamp)
    if matched is None:
        return None
    seconds = _epoch_seconds(matched[1], matched[3])
    if seconds is None:
        return None
    if matched[3] == "Z":
        if len(_SECONDS) >= _SECONDS_MAX:
            _SECONDS.clear()
        _SECONDS[matched[1]] = seconds
    return seconds * 1_000_000_000 + int((matched[2] or "").ljust(9, "0"))


def read_lines(texts: Sequence[str], last: int) -> tuple[list[int], list[int | None], list[str]]:
    """What each ``timestamps=true`` line says: the kubelet's timestamp, the rank its prefix names
    (:func:`rank_of`), its text after the timestamp. A line without a timestamp (the kubelet split
    a long line) keeps the one before it (``last`` for the first)."""
    stamps: list[int] = []
    ranks: list[int | None] = []
    rests: list[str] = []
    seconds, scale, known = _SECONDS, _SCALE, _RANKS
    for text in texts:
        stamp, _, rest = text.partition(" ")
        # the usual form, 2026-11-26T06:34:01.123456789Z, of a second already read: no regex, no date
        base = seconds.get(stamp[:19]) if stamp[-1:] == "Z" and stamp[19:20] == "." else None
        fraction = stamp[20:-1]
        if base is not None and 0 < len(fraction) < 10 and fraction.isdecimal():
            last = base * 1_000_000_000 + int(fraction) * scale[len(fraction)]
        elif (ns := parse_ns(stamp)) is not None:
            last = ns
        else:
            rest = text
        stamps.append(last)
        rests.append(rest)
        if rest[:1] != "[":
            ranks.append(None)
        else:
            rank = known.get(rest[: rest.find(":", 0, 64) + 1], -1)
            ranks.append(_rank_of_text(rest) if rank == -1 else rank)
    return stamps, ranks, rests


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


def rank_of(line: bytes | str) -> int | None:
    """The rank a line's prefix names (see the module), if any."""
    if isinstance(line, str):
        return _rank_of_text(line)
    matched = _RANK.match(line) if line[:1] == b"[" else None
    return None if matched is None else int(matched[matched.lastindex or 0])


def _rank_of_text(text: str) -> int | None:
    if text[:1] != "[":
        return None
    prefix = text[: text.find(":", 0, 64) + 1]  # every prefix ends at its first ':'
    if not prefix:
        matched = _RANK_TEXT.match(text)
        return None if matched is None else int(matched[matched.lastindex or 0])
    if (rank := _RANKS.get(prefix, -1)) != -1:
        return rank
    matched = _RANK_TEXT.match(prefix)
    rank = None if matched is None else int(matched[matched.lastindex or 0])
    if len(_RANKS) >= _RANKS_MAX:
        _RANKS.clear()
    _RANKS[prefix] = rank
    return rank


def clean(line: bytes) -> str:
    """The text kept of a line: invalid UTF-8 replaced, NUL bytes removed, secrets redacted."""
    return scrub(_decoded(line)) or ""


def clean_lines(lines: Sequence[bytes]) -> list[str]:
    """:func:`clean` of each line, in one pass over their text (:func:`decode_lines`,
    :func:`redact_lines`): a private key block across lines is redacted line by line."""
    return redact_lines(decode_lines(lines))[0]


def decode_lines(lines: Sequence[bytes]) -> list[str]:
    """Each line decoded with invalid UTF-8 replaced, without NUL bytes or trailing CRs, each run
    of other control characters a space (:func:`~controller.contract.redaction.clean_controls`);
    all in one pass over their text. Secrets are still in them (:func:`redact_lines`)."""
    if not lines:
        return []
    data = b"\n".join(lines)
    if not data.translate(None, _PLAIN):  # the usual case: printable ASCII, tabs and newlines only
        return data.decode("ascii").split("\n")
    data = data.replace(b"\x00", b"")
    if b"\r" in data:
        data = _TRAILING_CR.sub(b"", data)
    return clean_controls(data.decode("utf-8", errors="replace"), keep_newlines=True).split("\n")


def redact_lines(texts: Sequence[str], key_lines: int = 0) -> tuple[list[str], list[int] | None]:
    """``texts`` with their secrets redacted (:func:`~controller.contract.redaction.redact`), in one
    pass over their text where no private key block is in it; else line by line, each line of a
    block from its ``BEGIN`` line through its ``END`` line redacted whole, ``key_lines`` saying
    how many lines of a block still open came before the first (:attr:`LogPosition.key_lines`).

    Also returns the ``key_lines`` after each line: ``None`` where no block was open (0 each)."""
    if not texts:
        return [], None
    joined = "\n".join(texts)
    if not key_lines and "-----BEGIN " not in joined:
        # no pattern but a key block's crosses a newline: the lines stay as many
        return redact(joined).split("\n"), None
    out: list[str] = []
    after: list[int] = []
    for text in texts:
        if key_lines:
            out.append(REDACTED)
            ended = _KEY_END.search(text) is not None or key_lines >= KEY_BLOCK_MAX_LINES
            key_lines = 0 if ended else key_lines + 1
        else:
            out.append(scrub(text) or "")
            key_lines = 1 if _opens_key_block(text) else 0
        after.append(key_lines)
    return out, after


def _opens_key_block(text: str) -> bool:
    """Whether a private key's ``BEGIN`` line is in ``text`` with no ``END`` line after it."""
    begins = [matched.end() for matched in _KEY_BEGIN.finditer(text)]
    return bool(begins) and _KEY_END.search(text, begins[-1]) is None


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

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes (without their newline)."""
        *whole, rest = chunk.split(b"\n")
        if not self._pending and not self._dropped and (not whole or max(map(len, whole)) <= self._max):
            self._add(rest)  # the common case: whole lines within the bound
            return whole
        lines = []
        for piece in whole:
            if not self._pending and not self._dropped and len(piece) <= self._max:
                lines.append(piece)
            else:
                self._add(piece)
                lines.append(self._take())
        self._add(rest)
        return lines

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

    def first_new(self, stamps: Sequence[int]) -> int:
        """The index of the first new line among lines stamped ``stamps`` (all after it are new)."""
        for index, ts in enumerate(stamps):
            if self._caught_up or self.admit(ts):
                return index
        return len(stamps)

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
