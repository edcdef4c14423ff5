"""Container log lines as the followers store them on ``LOGS``: bounded, cleaned, timestamped,
labelled with the rank that printed them, and batched per container.

A followed container's log arrives as the kubelet serves it with ``timestamps=true``: one
RFC 3339 timestamp with nanoseconds, a space, the line. How the follower bounds, decodes and
redacts those lines, and drops what a resumed stream repeats, is :mod:`watchers.lines`; here are
the shapes every process reads (:class:`LogLine`, :class:`LogBatch`, :class:`LogPosition`) and
the timestamp and rank readers they share (:func:`parse_ns`, :func:`format_ns`,
:func:`since_time`, :func:`rank_of`, with their memo tables :data:`SECOND_EPOCHS` and
:data:`PREFIX_RANKS`). A batch is kept as the JSON text its lines are stored as
(:class:`PackedBatch`): a :class:`LogLine` model per line would cost more than everything else a
line costs.

Where a stream resumes (:class:`LogPosition`) is the last line stored: its timestamp in
nanoseconds, how many lines of that same timestamp were stored before it, and how many lines of
a private key block still open were stored (:attr:`LogPosition.key_lines`).

The rank of a line is read from the prefixes launchers and launchers' tools put before it:
Open MPI's ``--tag-output`` (``[1,3]<stdout>:``), PyTorch's ``[rank3]:`` and torchrun's
``--tee``/``--log-line-prefix-template`` default (``[default3]:``, the local rank).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import Field
from pydantic_core import to_json

from controller.contract.kinds import JobKind
from controller.contract.message import Message

__all__ = [
    "PREFIX_RANKS",
    "SECOND_EPOCHS",
    "LogBatch",
    "LogLine",
    "LogPosition",
    "PackedBatch",
    "format_ns",
    "parse_ns",
    "rank_of",
    "since_time",
]

SCHEMA_VERSION: Literal[1] = 1

_RANK_PATTERN = r"\[(?:\d+,(\d+)\]<std(?:out|err)>:|rank(\d+)\]:|[a-z_]*?(\d+)\]:)"
"""``[jobid,rank]<stdout>:``, ``[rankN]:``, ``[defaultN]:`` (torchrun's role and local rank)."""
_RANK = re.compile(_RANK_PATTERN.encode())
_RANK_TEXT = re.compile(_RANK_PATTERN)
PREFIX_RANKS: dict[str, int | None] = {}
"""The rank of each prefix seen (up to its first ``:``): lines of one launcher share a few."""
_RANKS_MAX = 4096
_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)")
SECOND_EPOCHS: dict[str, int] = {}
"""Epoch seconds of each ``YYYY-MM-DDTHH:MM:SS`` of a UTC (``Z``) stamp read (the fast path)."""
_SECONDS_MAX = 4096


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
    empty), ``lines`` is the JSON of the ``count`` objects its ``lines`` are stored as (``ts``,
    ``rank`` when known, ``text``), comma-separated."""

    head: LogBatch
    lines: bytes = b""
    count: int = 0
    prefix: bytes = b""
    """The JSON of ``head`` up to its position (:meth:`prefix_of`), where a follower knows it: the
    same for every batch of one container, written once."""
    subject: str = ""
    """Its container's subject, where a follower knows it."""

    @classmethod
    def of(cls, head: LogBatch, lines: Sequence[Mapping[str, int | str]]) -> PackedBatch:
        """``head`` with the lines' objects ``lines``."""
        return cls(head, to_json(lines)[1:-1], len(lines))

    @staticmethod
    def prefix_of(head: LogBatch) -> bytes:
        """What the JSON of every batch like ``head`` (without a note) holds before its position's
        object: the same for all the batches of a container."""
        empty = head.model_copy(update={"position": LogPosition(), "note": None, "lines": ()})
        dumped = empty.model_dump_json(exclude_defaults=True).encode()
        assert dumped.endswith(_EMPTY_POSITION), dumped  # the position is the last field dumped
        return dumped[: -len(_EMPTY_POSITION) + len(b'"position":')]

    def payload(self) -> bytes:
        """The batch's JSON, as :meth:`LogBatch.model_dump_json` (``exclude_defaults``) writes it."""
        if self.prefix and self.head.note is None:
            position = self.head.position.model_dump_json(exclude_defaults=True).encode()
            if self.count:
                return b"".join((self.prefix, position, b',"lines":[', self.lines, b"]}"))
            return self.prefix + position + b"}"
        head = self.head.model_dump_json(exclude_defaults=True).encode()
        return head[:-1] + b',"lines":[' + self.lines + b"]}" if self.count else head


_EMPTY_POSITION = b'"position":{}}'


def parse_ns(stamp: str) -> int | None:
    """Nanoseconds since the epoch of an RFC 3339 timestamp (``None``: not one)."""
    matched = _STAMP.fullmatch(stamp)
    if matched is None:
        return None
    seconds = _epoch_seconds(matched[1], matched[3])
    if seconds is None:
        return None
    if matched[3] == "Z":
        if len(SECOND_EPOCHS) >= _SECONDS_MAX:
            SECOND_EPOCHS.clear()
        SECOND_EPOCHS[matched[1]] = seconds
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
    if (rank := PREFIX_RANKS.get(prefix, -1)) != -1:
        return rank
    matched = _RANK_TEXT.match(prefix)
    rank = None if matched is None else int(matched[matched.lastindex or 0])
    if len(PREFIX_RANKS) >= _RANKS_MAX:
        PREFIX_RANKS.clear()
    PREFIX_RANKS[prefix] = rank
    return rank
