"""Run state folds events idempotently: stale, duplicate and reordered events change nothing."""

from __future__ import annotations

import pytest

from consumers.rules.state import MAX_EVENTS_PER_RUN, RunState, is_newer
from controller.contract.events import BusEvent
from controller.testing.events import at, job, k8s_event, launcher, running, terminated, worker


def _state(*events: BusEvent) -> RunState:
    state = RunState.for_event(events[0])
    for event in events:
        state.apply(event)
    return state


@pytest.mark.parametrize(
    ("new", "old", "newer"),
    [
        ("10", None, True),
        ("10", "9", True),
        ("9", "10", False),
        ("10", "10", False),
        ("abc", "abd", True),
        ("\u00b2", "1", True),  # a digit to str.isdigit, not a decimal number: opaque, no crash
        ("010", "9", True),  # not KEP-5504's form: opaque
    ],
    ids=[
        "first",
        "numeric-newer",
        "numeric-older",
        "same",
        "opaque-different",
        "superscript",
        "leading-zero",
    ],
)
def test_resource_version_order(new: str, old: str | None, newer: bool) -> None:
    assert is_newer(new, old) is newer


def test_older_pod_version_arriving_late_is_ignored() -> None:
    failed = worker(
        2,
        phase="Failed",
        containers=(terminated("OOMKilled", 137),),
        resource_version="20",
        observed_at=at(2),
    )
    stale = worker(2, resource_version="19", observed_at=at(1))

    state = _state(failed)

    assert state.apply(stale) is False
    assert state.pods[failed.uid].phase == "Failed"


def test_duplicate_is_reported_and_changes_nothing() -> None:
    event = worker(1, observed_at=at(1))
    state = _state(job("Running"), event)
    changed_at = state.last_pod_change_at

    assert state.apply(event) is False
    assert state.last_pod_change_at == changed_at


def test_deletion_with_the_same_version_still_marks_the_pod_deleted() -> None:
    event = worker(1, resource_version="30")
    state = _state(event)

    assert state.apply(worker(1, resource_version="30", change="DELETED", observed_at=at(1))) is True
    assert state.pods[event.uid].deleted


def test_older_job_version_does_not_move_the_phase_back() -> None:
    state = _state(job("Failed", resource_version="50", observed_at=at(5)))

    state.apply(job("Running", resource_version="40", observed_at=at(6)))

    assert (state.phase, state.finished_since) == ("Failed", at(5))


def test_replacement_pod_speaks_for_its_slot() -> None:
    old = worker(1, uid="old", phase="Failed", containers=(terminated("Error", 1),), created_at=at(0))
    new = worker(1, uid="new", created_at=at(2), observed_at=at(2))

    state = _state(old, new)

    assert [p.uid for p in state.workers()] == ["new"]


def test_failure_log_tail_stays_until_the_pod_recovers() -> None:
    crashed = launcher(
        phase="Running",
        ready=False,
        containers=(terminated("Error", 1, name="launcher"),),
        log_tail=("boom",),
    )
    state = _state(crashed)
    uid = crashed.uid

    state.apply(
        launcher(ready=False, containers=(terminated("Error", 1, name="launcher"),), observed_at=at(1))
    )
    assert state.pods[uid].log_tail == ("boom",)
    state.apply(launcher(containers=(running("launcher", restarts=1),), observed_at=at(2)))
    assert state.pods[uid].log_tail == ()


def test_output_of_a_running_pod_marks_the_log_feed() -> None:
    state = _state(job("Running"), launcher(log_tail=("step 1",), observed_at=at(1)))

    assert state.log_feed and state.last_log_at == at(1)


def test_pending_since_creation_and_phase_changes_stamp_the_time() -> None:
    state = _state(job("Pending", created_at=at(-3), observed_at=at(0)))
    assert state.phase_since == at(-3)

    state.apply(job("Running", observed_at=at(4)))
    assert state.phase_since == at(4)


def test_recent_events_are_bounded() -> None:
    state = _state(job("Running"))

    for i in range(MAX_EVENTS_PER_RUN + 10):
        state.apply(k8s_event("BackOff", f"back-off {i}", observed_at=at(0, i)))

    assert len(state.events) == MAX_EVENTS_PER_RUN
    assert list(state.events.values())[-1].message == f"back-off {MAX_EVENTS_PER_RUN + 9}"
