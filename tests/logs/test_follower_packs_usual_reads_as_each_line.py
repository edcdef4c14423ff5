"""A read in the kubelet's usual form is packed by columns (:func:`watchers.packing.pack_usual`)
into exactly the bytes, counts and positions the line-by-line path gives: timestamps of several
seconds and ties, ranks of one and of many prefixes, texts to escape, secrets to redact,
non-ASCII text, batches cut by size and a position carried on; any other read is left to the
line-by-line path, and what is packed reads back as the lines written."""

from __future__ import annotations

import pytest

from controller.contract.logs import LogBatch, LogPosition, PackedBatch, format_ns, rank_of
from watchers.lines import Resume
from watchers.packing import pack, pack_each, pack_usual

T = 1_795_000_000 * 10**9


def _read(texts: list[str], *, step_ns: int = 1) -> list[str]:
    return [f"{format_ns(T + i * step_ns)} {text}" for i, text in enumerate(texts)]


USUAL = {
    "plain": _read([f"step {i} loss 0.5" for i in range(50)]),
    "one-prefix": _read([f"[1,3]<stdout>:step {i}" for i in range(50)]),
    "many-prefixes": _read([f"[1,{i % 4}]<stdout>:step {i}" if i % 3 else f"plain {i}" for i in range(50)]),
    "odd-prefixes": _read(
        ["[INFO] started", "[", "[rank7]:x", "[" + "a" * 70 + ":1]:late colon", "[default2]:y"]
    ),
    "escapes": _read(['say "hi"', "back\\slash\\n", "tab\there", '\\"', '"},{"ts":1']),
    "secrets": _read(["password=hunter2 x", "Authorization: Bearer abc.def", "ok", "token: 'xyz'"]),
    "non-ascii": _read(["grüße 🙂", "\ufffd replaced", "naïve [1,2]<stdout>:x"]),
    "seconds-apart": _read([f"line {i}" for i in range(40)], step_ns=300_000_000),
    "all-tied": _read([f"line {i}" for i in range(40)], step_ns=0),
    "ties-then-not": [f"{format_ns(T + (i // 7))} line {i}" for i in range(40)],
    "empty-texts": _read(["", "", "x", ""]),
}


@pytest.mark.parametrize("texts", USUAL.values(), ids=USUAL.keys())
@pytest.mark.parametrize("limit", [1, 17, 64, 10**6])
@pytest.mark.parametrize(
    "position",
    [LogPosition(), LogPosition(ts=T, ties=3, stored_bytes=1000), LogPosition(ts=T - 1, ties=2)],
    ids=["start", "tied-on", "before"],
)
def test_usual_reads_pack_as_line_by_line(texts: list[str], limit: int, position: LogPosition) -> None:
    usual = pack_usual(texts, position, limit)
    assert usual is not None
    assert usual == pack_each(texts, position, limit, Resume(LogPosition()))


@pytest.mark.parametrize(
    ("texts", "position"),
    [
        (["2026-11-18T11:06:40.5Z short fraction"], LogPosition()),
        ([f"{format_ns(T)} stamped", "a continued line without a stamp"], LogPosition()),
        ([f"{format_ns(T)} -----BEGIN RSA PRIVATE KEY-----", f"{format_ns(T)} abc"], LogPosition()),
        ([f"{format_ns(T)} inside a key block"], LogPosition(ts=T, ties=1, key_lines=3)),
        (["1969-12-31T23:59:59.000000001Z before the epoch"], LogPosition()),
        (["2026-13-18T11:06:40.000000001Z month 13"], LogPosition()),
        ([f"{format_ns(T)} fine", "2026-11-18T11:06:4x.000000001Z a letter in the second"], LogPosition()),
        (["2026-11-18T11:06:40.12345678aZ not digits"], LogPosition()),
        (["2026-11-18T11:06:40.123456789+01:00 offset"], LogPosition()),
    ],
    ids=[
        "short-fraction",
        "stampless",
        "key-block",
        "key-block-open",
        "pre-1970",
        "month-13",
        "second-letter",
        "letter",
        "offset",
    ],
)
def test_other_reads_are_left_to_the_line_by_line_path(texts: list[str], position: LogPosition) -> None:
    assert pack_usual(texts, position, 1000) is None
    assert pack(texts, position, 1000, Resume(LogPosition())) == pack_each(
        texts, position, 1000, Resume(LogPosition())
    )


def test_a_stream_still_resuming_drops_what_was_stored() -> None:
    texts = _read(["old", "old too", "new"])
    packed = pack(texts, LogPosition(), 1000, Resume(LogPosition(ts=T + 1, ties=1)))
    assert [count for _, count, _ in packed] == [1]


def test_packed_lines_read_back_as_written() -> None:
    texts = USUAL["many-prefixes"] + USUAL["escapes"] + USUAL["non-ascii"]
    texts.sort()  # in time order, as the kubelet writes them
    packed = pack_usual(texts, LogPosition(), 10**6)
    assert packed is not None
    [(lines, count, end)] = packed
    head = LogBatch(run_uid="u", namespace="ns", job="j", pod="p", container="c", position=end)
    batch = LogBatch.model_validate_json(PackedBatch(head, lines, count).payload())
    assert [(line.ts, line.text) for line in batch.lines] == [
        (T + int(text[20:29]), text[31:]) for text in texts
    ]
    assert [line.rank for line in batch.lines] == [rank_of(text[31:]) for text in texts]
    assert batch.position == end
    assert end.stored_bytes == sum(len(text) - 31 for text in texts)
