"""A followed read's new lines as the JSON their batches store: a usual read by columns.

Nearly every read of a followed container is lines the kubelet stamped in one form,
``2026-11-26T06:34:01.123456789Z`` (UTC, nine digits of fraction), a space, the text. For such a
read :func:`pack` builds each batch's lines as the JSON text
:class:`~controller.contract.logs.PackedBatch` stores, a column at a time over the whole read with
operations of the standard library's C code (slices, maps, joins, replacements): the line's
timestamp is written as its second's epoch followed by its fraction's digits (no ``int``), its
rank as the JSON piece its prefix names (read once per prefix), its text escaped in one pass over
the read. No ``int``, dict or model is made per line, the Python cost that bounded the follower.

What it gives is byte for byte what the line-by-line path gives (:func:`watchers.lines.read_lines`,
:func:`watchers.lines.redact_lines`, then the lines' objects through ``to_json``; a test holds
them to it). Any other read goes that way: another stamp form, a line without a stamp, a
second before 1970, a private key block open or beginning, a resumed stream not yet past what
was stored (:func:`pack_usual` says ``None``, :func:`pack_each` packs it).
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate, chain
from operator import add, itemgetter

from pydantic_core import to_json

from controller.contract.logs import SECOND_EPOCHS, LogPosition, parse_ns, rank_of
from controller.contract.redaction import redact
from watchers.lines import Resume, read_lines, redact_lines

__all__ = ["Packed", "pack", "pack_each", "pack_usual"]

Packed = tuple[bytes, int, LogPosition]
"""One batch's lines: their JSON objects comma-separated, how many, the position they end at."""

_HEAD = itemgetter(slice(0, 31))
"""``2026-11-26T06:34:01.123456789Z `` of a line in the usual form."""
_SECOND = itemgetter(slice(0, 19))
_FRACTION = itemgetter(slice(20, 29))
_REST = itemgetter(slice(31, None))
_OPEN = '"},{"ts":'
"""What comes before a line's timestamp: the end of the line before (cut off the first)."""
_TEXT = ',"text":"'
_MISS = "\x00miss"
_PIECES: dict[str, str] = {}
"""The JSON of each rank prefix seen (up to its first ``:``): its rank, if any, and ``_TEXT``."""
_PIECES_MAX = 4096


def pack(texts: list[str], position: LogPosition, limit: int, resume: Resume) -> list[Packed]:
    """The batches of the new lines among decoded ``texts`` (:func:`watchers.lines.decode_lines`)
    following a stream stored up to ``position``, each cut once its texts hold ``limit``
    characters: :func:`pack_usual` where it can, else :func:`pack_each`."""
    if resume.caught_up and (packed := pack_usual(texts, position, limit)) is not None:
        return packed
    return pack_each(texts, position, limit, resume)


def pack_each(texts: list[str], position: LogPosition, limit: int, resume: Resume) -> list[Packed]:
    """:func:`pack` line by line: the timestamps and ranks read (:func:`~watchers.lines.read_lines`),
    the lines ``resume`` drops dropped, the secrets redacted (a private key block across lines
    and reads included: :func:`~watchers.lines.redact_lines`), one object a line."""
    stamps, ranks, rests = read_lines(texts, position.ts)
    first = resume.first_new(stamps)
    if first:
        stamps, ranks, rests = stamps[first:], ranks[first:], rests[first:]
    redacted, key_lines = redact_lines(rests, position.key_lines)
    packed: list[Packed] = []
    lines: list[dict[str, int | str]] = []
    size = 0
    ts, ties, stored = position.ts, position.ties, position.stored_bytes
    for i, (stamp, rank, text) in enumerate(zip(stamps, ranks, redacted, strict=True)):
        ties = ties + 1 if stamp == ts else 1
        ts = stamp
        stored += len(text)
        size += len(text)
        lines.append(
            {"ts": stamp, "text": text} if rank is None else {"ts": stamp, "rank": rank, "text": text}
        )
        if size >= limit or i == len(redacted) - 1:
            keys = key_lines[i] if key_lines is not None else 0
            end = LogPosition(ts=ts, ties=ties, stored_bytes=stored, key_lines=keys)
            packed.append((to_json(lines)[1:-1], len(lines), end))
            lines, size = [], 0
    return packed


def pack_usual(texts: list[str], position: LogPosition, limit: int) -> list[Packed] | None:
    """:func:`pack` of a read in the usual form by columns (see the module), every line new; None
    where the read is not in that form."""
    n = len(texts)
    if not n or position.key_lines:
        return None
    heads = "".join(map(_HEAD, texts))
    if (
        len(heads) != 31 * n
        or heads[19::31] != "." * n
        or heads[29::31] != "Z" * n
        or heads[30::31] != " " * n
    ):
        return None
    fractions = list(map(_FRACTION, texts))
    digits = "".join(fractions)
    if not (digits.isascii() and digits.isdecimal()):
        return None
    first = heads[:19]
    # a second's 19 characters can only be found at the start of a head: all of one second, or not
    seconds = None if heads.count(first) == n else list(map(_SECOND, texts))
    opens = _opens({first} if seconds is None else set(seconds))
    if opens is None:
        return None
    if seconds is None:
        starts, stamps = [opens[first]] * n, fractions  # a line's stamp: its fraction in its second
    else:
        starts, stamps = list(map(opens.__getitem__, seconds)), list(map(add, seconds, fractions))
    rests = list(map(_REST, texts))
    joined = "\n".join(rests)
    if "-----BEGIN " in joined:
        return None
    redacted = redact(joined)
    clean = rests if redacted is joined else redacted.split("\n")
    if '"' in redacted or "\\" in redacted or "\t" in redacted:
        escaped = redacted.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").split("\n")
    else:
        escaped = clean
    ranked = rests[0][:1] == "[" or "\n[" in joined
    pieces = _pieces(rests, joined) if ranked else [_TEXT] * n
    sizes = list(accumulate(map(len, clean)))
    packed: list[Packed] = []
    start = 0
    while start < n:
        # the first line at which the batch's texts reach the limit, as the line-by-line loop cuts
        base = sizes[start - 1] if start else 0
        end = min(bisect_left(sizes, base + limit, start) + 1, n)
        parts = zip(
            starts[start:end], fractions[start:end], pieces[start:end], escaped[start:end], strict=True
        )
        body = "".join(chain.from_iterable(parts))[3:] + '"}'
        ts = int(starts[end - 1][len(_OPEN) :] + fractions[end - 1])
        ties = _tied(stamps, start, end)
        if ties == end - start and ts == position.ts:
            ties += position.ties
        position = LogPosition(ts=ts, ties=ties, stored_bytes=position.stored_bytes + sizes[end - 1] - base)
        packed.append((body.encode(), end - start, position))
        start = end
    return packed


def _opens(seconds: set[str]) -> dict[str, str] | None:
    """What opens a line of each second: ``_OPEN`` and the second's epoch; None where one is not a
    second after 1970 (:func:`~controller.contract.logs.parse_ns` reads what the cache lacks)."""
    opens = {}
    for second in seconds:
        epoch = SECOND_EPOCHS.get(second)
        if epoch is None:
            ns = parse_ns(second + "Z")
            if ns is None:
                return None
            epoch = ns // 1_000_000_000
        if epoch <= 0:
            return None
        opens[second] = f"{_OPEN}{epoch}"
    return opens


def _pieces(rests: list[str], joined: str) -> list[str]:
    """The JSON between each line's timestamp and its text (``joined``: the texts, a line each):
    its rank where its prefix names one; one piece for all where every line has the first's."""
    known = _PIECES
    first = rests[0]
    prefix = first[: first.find(":", 0, 64) + 1] if first[:1] == "[" else ""
    if prefix and joined.count("\n" + prefix) == len(rests) - 1:  # every line starts with it
        return [_piece(prefix, first)] * len(rests)
    pieces = [known.get(r[: r.find(":", 0, 64) + 1], _MISS) if r[:1] == "[" else _TEXT for r in rests]
    if _MISS in pieces:
        for i, piece in enumerate(pieces):
            if piece is _MISS:
                rest = rests[i]
                pieces[i] = _piece(rest[: rest.find(":", 0, 64) + 1], rest)
    return pieces


def _piece(prefix: str, rest: str) -> str:
    """The piece of a line ``rest`` starting with ``[``, ``prefix`` its prefix up to its first
    ``:`` (empty: none in its first 64 characters), remembered per prefix."""
    piece = _PIECES.get(prefix) if prefix else None
    if piece is None:
        rank = rank_of(rest)
        piece = _TEXT if rank is None else f',"rank":{rank}{_TEXT}'
        if prefix:
            if len(_PIECES) >= _PIECES_MAX:
                _PIECES.clear()
            _PIECES[prefix] = piece
    return piece


def _tied(stamps: list[str], start: int, end: int) -> int:
    """How many lines of ``stamps[start:end]`` up to the last share its timestamp: a slice compared
    whole, its length doubled, then halved (no Python step per line)."""
    last, most = stamps[end - 1], end - start
    if stamps[start] == last and stamps[start:end] == [last] * most:
        return most
    low, span = 1, 2  # the last `low` lines share it
    while span < most and stamps[end - span] == last and stamps[end - span : end] == [last] * span:
        low, span = span, span * 2
    high = min(span, most)  # the last `high` lines do not all share it
    while high - low > 1:
        mid = (low + high) // 2
        if stamps[end - mid : end] == [last] * mid:
            low = mid
        else:
            high = mid
    return low
