"""A batch's consecutive events of one run are judged once, and reach the same verdict.

A relist passes each job's pods one after another; judging the run after each of them costs
17 evaluations of every rule per job of 16 workers, which is what kept the rules consumer
behind a cold start. ``RuleEngine.observe_all`` folds a streak of one run's events and
judges the run once, at the last one's time; where runs alternate, every event is judged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime

import pytest

from consumers.rules import RuleEngine
from consumers.rules.catalog import CATALOG
from consumers.rules.rule import Context, Detection
from consumers.rules.state import RunState
from controller.contract.events import BusEvent
from controller.contract.findings import Finding
from controller.testing.events import at, job, ref, running, terminated, worker
from tests.rules.corpus_replay import events_for, load, run


def _verdict(firing: Iterable[Finding]) -> list[tuple[str, str]]:
    return sorted((f.rule, f.root_cause) for f in firing)


def _at_their_time(events: list[BusEvent]) -> list[tuple[BusEvent, datetime]]:
    return [(event, event.observed_at) for event in events]


@pytest.mark.parametrize("succeed", [False, True], ids=["failed", "succeeded"])
def test_every_corpus_run_gets_the_same_verdict_judged_per_streak(succeed: bool) -> None:
    differing = []
    for entry in load():
        one_by_one = _verdict(run(entry, succeed=succeed).firing)  # the replay, event by event
        batched = RuleEngine()
        batched.observe_all(_at_their_time(events_for(entry, succeed=succeed)))
        batched.tick(at(2))
        if _verdict(batched.firing()) != one_by_one:
            differing.append((entry.id, one_by_one, _verdict(batched.firing())))

    assert differing == []


class Counting:
    """A rule that never holds and counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self, state: RunState, ctx: Context) -> Detection | None:
        self.asked += 1
        return None


def _counted() -> tuple[RuleEngine, Counting]:
    """An engine whose catch-all rule (quiet while nothing failed) counts the judgements."""
    counting = Counting()
    *rules, catch_all = CATALOG
    assert catch_all.id == "failed"
    return RuleEngine(rules=(*rules, replace(catch_all, detect=counting))), counting


def _relisted(name: str, uid: str, workers: int, oom_index: int | None = None) -> list[BusEvent]:
    """A running job and its pods, as a relist passes them on; one worker OOM-killed, if asked."""
    run = ref(name=name, uid=uid)
    oom = terminated("OOMKilled", 137, name="worker")
    return [
        job("Running", job=run, observed_at=at(1)),
        *(
            worker(
                i,
                job=run,
                observed_at=at(1),
                phase="Failed" if i == oom_index else "Running",
                ready=i != oom_index,
                containers=(oom,) if i == oom_index else (running(),),
            )
            for i in range(workers)
        ),
    ]


def test_a_relisted_job_is_judged_once_and_its_oom_kill_still_found() -> None:
    engine, counting = _counted()
    first = _relisted("pi", "uid-pi", 16, oom_index=7)
    second = _relisted("rho", "uid-rho", 16)

    changes = engine.observe_all(_at_their_time(first + second))

    assert counting.asked == 2  # one streak per job, not 17 evaluations each
    assert [(f.job.name, f.rule, f.status) for f in changes] == [("pi", "oom", "firing")]


def test_alternating_runs_are_judged_at_every_event() -> None:
    engine, counting = _counted()
    first, second = _relisted("pi", "uid-pi", 3), _relisted("rho", "uid-rho", 3)
    interleaved = [event for pair in zip(first, second, strict=True) for event in pair]

    engine.observe_all(_at_their_time(interleaved))

    assert counting.asked == len(interleaved)
