"""The pieces a followed line goes through: the kubelet's timestamp read to the nanosecond in any
RFC 3339 form, the rank read from each launcher's prefix, lines split across reads and bounded
whatever their length, text cleaned in one pass without merging or losing lines, and a resume
that drops exactly what was stored."""

from __future__ import annotations

import pytest

from controller.contract.logs import LogPosition, format_ns, parse_ns, rank_of, since_time
from watchers.lines import LineSplitter, Resume, clean_lines, decode_lines

T = 1_795_000_000 * 10**9


@pytest.mark.parametrize(
    ("stamp", "ns"),
    [
        ("2026-11-18T11:06:40.123456789Z", T + 123_456_789),
        ("2026-11-18T11:06:40.5Z", T + 500_000_000),
        ("2026-11-18T11:06:40Z", T),
        ("2026-11-18T12:06:40.000000001+01:00", T + 1),
        ("2026-11-18 11:06:40Z", None),
        ("2026-13-18T11:06:40Z", None),
        ("step 1 loss 2.0", None),
    ],
    ids=["nanoseconds", "short-fraction", "whole-second", "offset", "space", "month-13", "not-a-stamp"],
)
def test_kubelet_timestamps_are_read_to_the_nanosecond(stamp: str, ns: int | None) -> None:
    assert parse_ns(stamp) == ns


def test_a_position_resumes_from_its_whole_second() -> None:
    assert format_ns(T + 7) == "2026-11-18T11:06:40.000000007Z"
    assert since_time(T + 999_999_999) == "2026-11-18T11:06:40Z"


@pytest.mark.parametrize(
    ("line", "rank"),
    [
        (b"[1,12]<stdout>:step 3", 12),
        (b"[1,0]<stderr>:NCCL WARN", 0),
        (b"[rank7]:Traceback (most recent call last):", 7),
        (b"[default3]:loss 1.0", 3),
        (b"[trainer11]:loss 1.0", 11),
        (b"step 3 [rank7]: late", None),
        (b"[INFO] started", None),
    ],
    ids=["open-mpi", "open-mpi-stderr", "pytorch", "torchrun", "torchrun-role", "not-a-prefix", "no-number"],
)
def test_ranks_are_read_from_launcher_prefixes(line: bytes, rank: int | None) -> None:
    assert rank_of(line) == rank


def test_lines_split_across_reads_are_joined_and_long_ones_bounded() -> None:
    splitter = LineSplitter(8)
    got = [*splitter.feed(b"ab"), *splitter.feed(b"c\n0123456789abc"), *splitter.feed(b"def\nxy\nz")]
    assert got == [b"abc", b"01234567 [... 8 bytes of this line dropped]", b"xy"]
    assert list(splitter.finish()) == [b"z"]
    splitter.feed(b"partial")
    splitter.discard()  # a broken stream: the partial line comes again whole
    assert list(splitter.finish()) == []


@pytest.mark.parametrize(
    "chunks",
    [
        [b"ab", b"c\n0123456789abc", b"def\nxy\nz"],
        [b"abc\ndef\n", b"gh", b"ij\nk"],
        [b"abcd", b"efgh", b"i\nshort\n"],
        [b"caf\xc3", b"\xa9\nok\n", b"tab\there\r\nnul\x00\n"],
        [b"no newline", b" still", b"\n"],
    ],
    ids=["long-lines", "pending", "pending-too-long", "non-ascii", "no-newline"],
)
def test_reads_decoded_as_one_text_give_the_lines_split_first(chunks: list[bytes]) -> None:
    whole, split = LineSplitter(8), LineSplitter(8)
    got = [line for chunk in chunks for line in whole.feed_text(chunk)]
    assert got == [line for chunk in chunks for line in decode_lines(split.feed(chunk))]
    assert list(whole.finish()) == list(split.finish())


def test_text_is_cleaned_in_one_pass_without_merging_lines() -> None:
    lines = [
        b"token=abc123",
        b"-----BEGIN RSA PRIVATE KEY-----",
        b"MIIE",
        b"-----END RSA PRIVATE KEY-----",
        b"ok\x00",
    ]
    assert clean_lines(lines) == ["token=[REDACTED]", "[REDACTED]", "[REDACTED]", "[REDACTED]", "ok"]
    assert clean_lines([b"a\xffb", b"\x1b[31mred\x1b[0m"]) == ["a\ufffdb", "red"]


def test_a_resume_drops_exactly_the_lines_stored_at_its_timestamp() -> None:
    resume = Resume(LogPosition(ts=T + 5, ties=2))
    stamps = [T + 4, T + 5, T + 5, T + 5, T + 4, T + 6]
    assert [resume.admit(ts) for ts in stamps] == [False, False, False, True, True, True]
