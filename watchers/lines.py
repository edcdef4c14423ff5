"""The follower's line work: a followed container's bytes into bounded, clean, redacted,
timestamped lines, and where a resumed stream's new lines begin.

The shapes they are stored in (:class:`~controller.contract.logs.LogBatch`,
:class:`~controller.contract.logs.LogPosition`) and the readers of timestamps and ranks every
process shares are :mod:`controller.contract.logs`; this is what only the follower
(:mod:`watchers.following`) does with them.

Every line is bounded before it is kept (:class:`LineSplitter`: at most ``max_line_bytes``, the
rest of a longer line counted and dropped, with a marker saying how much), decoded with invalid
UTF-8 replaced, stripped of NUL bytes, and passed through the redaction every republished text
gets (:func:`controller.contract.redaction.scrub`). A private key block is redacted whole from
its ``BEGIN`` line through its ``END`` line also where it spans reads, batches or a resumed
stream: the position says how many lines of an open block were stored
(:attr:`~controller.contract.logs.LogPosition.key_lines`).

What arrives in one read is handled as one text wherever that is the same (decoding, control
characters, the search for secrets: :meth:`LineSplitter.feed_text`, :func:`decode_lines`,
:func:`redact_lines`); what is left per line is its timestamp (:func:`read_lines`: a second's
epoch computed once, a prefix's rank read once), and for a read in the kubelet's usual form not
even that (:mod:`watchers.packing`).

The kubelet's ``sinceTime`` is whole seconds, so a resumed stream repeats the lines of that
second; :class:`Resume` drops what was already stored (no duplicate) and keeps the first line
after it (no gap), also when several lines share one timestamp.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from controller.contract.logs import PREFIX_RANKS, SECOND_EPOCHS, LogPosition, parse_ns, rank_of
from controller.contract.redaction import REDACTED, clean_controls, redact, scrub

__all__ = [
    "KEY_BLOCK_MAX_LINES",
    "LineSplitter",
    "Resume",
    "clean_lines",
    "decode_lines",
    "read_lines",
    "redact_lines",
]

_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY-----")
KEY_BLOCK_MAX_LINES = 1000
"""Lines redacted after a private key's ``BEGIN`` line when no ``END`` line comes (an RSA key of
16,384 bits is about 150 lines of PEM): a block left open does not hide the rest of a log."""
_SCALE = (0, *(10 ** (9 - n) for n in range(1, 10)))
"""Nanoseconds per unit of a fraction of n digits."""
_PLAIN = bytes(range(0x20, 0x7F)) + b"\t\n"
"""Bytes that need neither decoding with replacement nor cleaning."""
_TRAILING_CR = re.compile(rb"\r+(?=\n)|\r+\Z")


def read_lines(texts: Sequence[str], last: int) -> tuple[list[int], list[int | None], list[str]]:
    """What each ``timestamps=true`` line says: the kubelet's timestamp, the rank its prefix names
    (:func:`rank_of`), its text after the timestamp. A line without a timestamp (the kubelet split
    a long line) keeps the one before it (``last`` for the first)."""
    stamps: list[int] = []
    ranks: list[int | None] = []
    rests: list[str] = []
    seconds, scale, known = SECOND_EPOCHS, _SCALE, PREFIX_RANKS
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
            ranks.append(rank_of(rest) if rank == -1 else rank)
    return stamps, ranks, rests


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
        lines = []
        if whole and (self._pending or self._dropped):  # the line the last chunk began
            self._add(whole[0])
            lines.append(self._take())
            del whole[0]
        if whole and max(map(len, whole)) > self._max:
            for piece in whole:
                if len(piece) > self._max:
                    self._add(piece)
                lines.append(self._take() if self._dropped else piece)
        elif lines:
            lines += whole
        else:
            lines = whole  # the common case: whole lines within the bound
        self._add(rest)
        return lines

    def feed_text(self, chunk: bytes) -> list[str]:
        """The lines ``chunk`` completes, decoded (:func:`decode_lines`); where they are printable
        ASCII within the bound (the usual read) decoded and split as one text, not split first."""
        end = chunk.rfind(b"\n")
        if end >= 0 and not self._dropped:
            data = bytes(self._pending) + chunk[:end] if self._pending else chunk[:end]
            if not data.translate(None, _PLAIN):
                lines = data.decode("ascii").split("\n")
                if max(map(len, lines)) <= self._max:
                    self._pending.clear()
                    self._add(chunk[end + 1 :])
                    return lines
        return decode_lines(self.feed(chunk))

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

    @property
    def caught_up(self) -> bool:
        """Whether every line from here on is new (the stream is past what was stored)."""
        return self._caught_up

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
