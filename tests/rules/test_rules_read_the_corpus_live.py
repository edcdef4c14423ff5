"""Every failure text of the corpus, printed by a run that recovers and succeeds, is no failure (at
most a pending observation, never firing, unless its wording always ends the process);
printed by a running job, it is seen before the pod ends; printed by a run that fails, it gives
the same verdict as the failure-time tail alone.

A signature is evidence, not a verdict: runs print CUDA out-of-memory lines a batch-size search
caught, NCCL connections they retried, warnings naming a signal. Before the rules read output
live they judged a tail whatever became of its pod, and most of the corpus's failure texts fired
their rule in a pod that exited 0 in a run that succeeded. Scored here over the whole corpus,
entry by entry through the real engine (``corpus_replay``).
"""

from __future__ import annotations

import pytest

from consumers.rules.families import family_failures, verb
from consumers.rules.live import HOROVOD_STALL
from tests.rules.corpus_replay import Entry, live_events_for, load, run, run_live

FAILURES = [e for e in load() if e.expect is not None and e.where in ("log", "termination")]
LOGGED = [e for e in FAILURES if e.where == "log"]
LIVE_RECALL_FLOOR = 0.9


def _fatal(entry: Entry) -> bool:
    """The text holds a wording that always ends the process (seen live, it fires at once)."""
    seen = live_events_for(entry, end=False)[-1]
    return any(mark.fatal for mark in getattr(seen, "marks", ()))


def test_no_failure_text_in_a_pod_that_exited_0_of_a_run_that_succeeded_is_a_finding() -> None:
    fired = [(e.id, sorted({f.rule for f in run(e, succeed=True).changes})) for e in FAILURES]
    fired = [(entry, rules) for entry, rules in fired if rules]

    print(
        f"{len(fired)} of {len(FAILURES)} failure texts fire in a pod that exited 0 of a run that succeeded"
    )
    assert fired == []


def test_a_failure_text_seen_live_in_a_run_that_succeeds_leaves_nothing_firing() -> None:
    outcomes = {e.id: (e, run_live(e, succeed=True)) for e in LOGGED}
    left = [(i, sorted(f.rule for f in o.firing)) for i, (_, o) in outcomes.items() if o.firing]
    fired = [
        i for i, (e, o) in outcomes.items() if any(f.status == "firing" for f in o.changes) and not _fatal(e)
    ]

    assert left == []
    assert fired == []  # only a fatal wording is a verdict while the run goes on: the rest is pending


def test_a_failure_text_seen_live_is_found_before_its_pod_ends() -> None:
    missed = [(e.id, e.expect) for e in LOGGED if e.expect not in run_live(e, end=False).rules]
    trail = {e.id for e in LOGGED if "NCCL INFO" in e.text and "NCCL WARN" not in e.text}
    stalls = {
        e.id for e in LOGGED if any(verb(h) == "stalled" for h in family_failures(tuple(e.text.splitlines())))
    }
    tail_only = trail | stalls | {e.id for e in LOGGED if HOROVOD_STALL.search(e.text)}
    recall = 1 - len(missed) / len(LOGGED)

    print(f"seen live: {len(LOGGED) - len(missed)} of {len(LOGGED)} found before the pod ended", *missed)
    assert recall >= LIVE_RECALL_FLOOR
    # the kernel's OOM killer in a log is an OOM kill only once a container fails of it; a stall
    # report seen while the run goes on is a hang (hang-progress names the rank), a cause once it
    # fails; NCCL's error trail without a WARN line is INFO lines, read from the failure-time tail
    assert {expect for i, expect in missed if i not in tail_only or expect != "mpi-comm"} <= {
        "oom",
        "mpi-abort",
    }


@pytest.mark.parametrize("entry", LOGGED, ids=lambda e: e.id)
def test_a_failure_text_seen_live_then_failing_gives_the_tails_verdict(entry: Entry) -> None:
    live, tail = run_live(entry), run(entry)

    assert live.rules == tail.rules
    assert [f.rule for f in live.changes if f.status == "firing"].count(
        entry.expect
    ) <= 1  # the verdict, once
