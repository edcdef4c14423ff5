"""The rules' log reader passes on a bounded, valid event whatever a batch holds.

Every input is bounded: a batch of a thousand signature lines, a line of a mebibyte, a run of
hundreds of ranks, a batch a follower wrote before batches named their run's kind."""

from __future__ import annotations

from consumers.rules.live import CONTEXT_LINES, scan
from consumers.rules.logreader import told
from controller.contract.events import (
    MAX_MARK_CHARS,
    MAX_MARKS_PER_READING,
    MAX_RANKS_PER_READING,
    LogSeen,
    parse_event,
)
from controller.testing.events import at, log_batch

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def _round_trip(seen: LogSeen | None) -> LogSeen:
    assert seen is not None
    again = parse_event(seen.model_dump_json())  # what a consumer reads back validates
    assert isinstance(again, LogSeen)
    return again


def test_a_thousand_signature_lines_pass_on_as_many_as_one_event_holds() -> None:
    batch = log_batch(*(f"[1,{i % 8}]<stderr>:{OOM}" for i in range(1000)), observed_at=at(1))

    seen = _round_trip(told(batch, at(1)))

    assert len(seen.marks) == MAX_MARKS_PER_READING
    assert scan(batch.lines).left_out == 1000 - MAX_MARKS_PER_READING
    assert all(m.signature == "gpu-oom/oom" for m in seen.marks)


def test_a_mebibyte_line_passes_on_cut_to_its_bound() -> None:
    seen = _round_trip(told(log_batch(OOM + " x" * (1 << 19), observed_at=at(1)), at(1)))

    (mark,) = seen.marks
    assert mark.line.startswith(OOM) and len(mark.line) == MAX_MARK_CHARS


def test_hundreds_of_ranks_pass_on_the_latest_that_fit() -> None:
    lines = [f"[1,{rank}]<stdout>:step 1" for rank in range(400)]
    seen = _round_trip(told(log_batch(*lines, observed_at=at(1), step_s=0.5), at(5)))

    assert len(seen.ranks) == MAX_RANKS_PER_READING
    assert {r.rank for r in seen.ranks} == set(range(400 - MAX_RANKS_PER_READING, 400))


def test_lines_after_a_signature_follow_it_and_the_rest_are_only_counted() -> None:
    lines = ["step 1", OOM, *(f"  frame {i}" for i in range(20))]
    seen = _round_trip(told(log_batch(*lines, observed_at=at(1)), at(1)))

    assert [m.line for m in seen.marks] == lines[1 : 2 + CONTEXT_LINES]
    assert (seen.lines, [r.rank for r in seen.ranks]) == (len(lines), [None])


def test_a_batch_that_names_no_run_kind_or_pod_uid_is_not_passed_on() -> None:
    batch = log_batch(OOM, observed_at=at(1))

    assert told(batch.model_copy(update={"kind": None}), at(1)) is None
    assert told(batch.model_copy(update={"pod_uid": None}), at(1)) is None
