"""The rules' memory is bounded in pods held, not only in runs.

A run costs about 8 KiB per pod held, so a few thousand runs of 17 pods fill the rules
Deployment's memory long before ``max_runs``. ``max_pods`` bounds the pods held: over it,
the least recently updated finished runs go first (their late events are then ignored); with
no finished run left, the least recently updated live run is dropped and admitted again by
its next event; the run an event is folded into is never dropped for it.
"""

from __future__ import annotations

import logging

import pytest

from consumers.rules import RuleEngine
from consumers.rules.thresholds import RuleThresholds
from controller.contract.events import BusEvent, JobPhase
from controller.testing.events import at, job, ref, worker

PODS = 4


def _run(name: str, phase: JobPhase, minute: float) -> list[BusEvent]:
    run = ref(name=name, uid=f"uid-{name}")
    pods = [
        worker(i, job=run, uid=f"uid-{name}-{i}", name=f"{name}-worker-{i}", observed_at=at(minute))
        for i in range(PODS)
    ]
    return [
        job("Running", job=run, observed_at=at(minute)),
        *pods,
        job(phase, job=run, observed_at=at(minute)),
    ]


def _hold(engine: RuleEngine, *runs: tuple[str, JobPhase]) -> None:
    for minute, (name, phase) in enumerate(runs):
        for event in _run(name, phase, minute):
            engine.observe(event, event.observed_at)


def test_finished_runs_go_first_least_recently_updated_first() -> None:
    engine = RuleEngine(RuleThresholds(max_pods=3 * PODS))

    _hold(engine, ("done-1", "Succeeded"), ("live-1", "Running"), ("done-2", "Failed"), ("live-2", "Running"))

    assert engine.pods_held == 3 * PODS
    assert all(engine.state(uid) is not None for uid in ("uid-live-1", "uid-done-2", "uid-live-2"))
    assert engine.state("uid-done-1") is None

    _hold(engine, ("live-3", "Running"))

    assert engine.pods_held == 3 * PODS
    assert engine.state("uid-done-2") is None
    assert {uid for uid in ("uid-live-1", "uid-live-2", "uid-live-3") if engine.state(uid)} == {
        "uid-live-1",
        "uid-live-2",
        "uid-live-3",
    }


def test_a_forgotten_finished_runs_late_events_are_ignored() -> None:
    engine = RuleEngine(RuleThresholds(max_pods=2 * PODS))
    _hold(engine, ("done", "Failed"), ("live-1", "Running"), ("live-2", "Running"))
    assert engine.state("uid-done") is None

    late = worker(0, job=ref(name="done", uid="uid-done"), uid="uid-done-0", observed_at=at(9))

    assert engine.observe(late, at(9)) == []
    assert engine.state("uid-done") is None and engine.pods_held == 2 * PODS


def test_live_runs_beyond_the_bound_drop_the_least_recently_updated_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = RuleEngine(RuleThresholds(max_pods=2 * PODS + 1))

    with caplog.at_level(logging.WARNING, logger="consumers.rules.engine"):
        _hold(engine, ("live-1", "Running"), ("live-2", "Running"), ("live-3", "Running"))

    assert engine.state("uid-live-1") is None
    assert engine.state("uid-live-2") is not None and engine.state("uid-live-3") is not None
    assert engine.pods_held == 2 * PODS
    assert any("dropping live run uid-live-1" in r.getMessage() for r in caplog.records)

    again = worker(0, job=ref(name="live-1", uid="uid-live-1"), uid="uid-live-1-0", observed_at=at(9))
    engine.observe(again, at(9))

    held = engine.state("uid-live-1")
    assert held is not None and list(held.pods) == ["uid-live-1-0"]  # admitted again, from that event on


def test_a_single_run_larger_than_the_bound_is_still_held() -> None:
    engine = RuleEngine(RuleThresholds(max_pods=PODS - 1))

    _hold(engine, ("big", "Running"))

    assert engine.state("uid-big") is not None and engine.pods_held == PODS


def test_pods_held_are_counted_back_when_runs_are_forgotten() -> None:
    engine = RuleEngine(RuleThresholds(forget_after_s=60))
    _hold(engine, ("done", "Succeeded"), ("live", "Running"))
    assert engine.pods_held == 2 * PODS

    engine.tick(at(10))

    assert engine.state("uid-done") is None and engine.pods_held == PODS


def test_runs_a_warm_start_puts_back_count_with_their_pods() -> None:
    """The snapshot load puts runs back into the engine (:meth:`RuleEngine.restore`)."""
    engine = RuleEngine()
    _hold(engine, ("done", "Succeeded"), ("live", "Running"))
    warm = RuleEngine(RuleThresholds(max_pods=PODS))

    warm.restore(engine.held.items(), ())
    assert warm.pods_held == 2 * PODS
    _hold(warm, ("new", "Running"))

    assert warm.state("uid-done") is None and warm.state("uid-live") is None
    assert warm.pods_held == PODS
