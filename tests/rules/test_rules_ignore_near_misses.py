"""Signals that look like a failure but are not one raise no finding.

Where the run does fail for a reason no rule knows, only the catch-all ``failed`` speaks:
the near miss's own rule stays quiet."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from consumers.rules import RuleEngine
from controller.contract.events import BusEvent
from controller.testing.events import (
    at,
    failed_launcher,
    job,
    k8s_event,
    launcher,
    log_probe,
    pending_worker,
    replay,
    running,
    running_run,
    terminated,
    worker,
)


def _sigkill_without_oom_evidence() -> list[BusEvent]:
    return [
        *running_run(),
        worker(2, phase="Failed", ready=False, containers=(terminated("Error", 137),), observed_at=at(1)),
        job("Failed", observed_at=at(1, 5)),
    ]


def _completed_worker() -> list[BusEvent]:
    return [
        *running_run(),
        worker(
            1, phase="Succeeded", ready=False, containers=(terminated("Completed", 0),), observed_at=at(1)
        ),
    ]


def _failed_scheduling_then_scheduled() -> list[BusEvent]:
    return [
        job("Pending"),
        k8s_event(
            "FailedScheduling",
            "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            involved="pi-worker-3",
        ),
        *(worker(i, observed_at=at(2)) for i in range(4)),
        launcher(observed_at=at(2)),
        job("Running", observed_at=at(2)),
    ]


def _worker_failure_propagates() -> list[BusEvent]:
    return [
        *running_run(),
        worker(2, phase="Failed", ready=False, containers=(terminated("Error", 1),), observed_at=at(1)),
        job("Failed", observed_at=at(1, 10)),
    ]


def _healthy_launcher_output() -> list[BusEvent]:
    log = "step 100 loss 2.31\nMPI startup(): Imported environment\nall ranks joined, memory: 12.1 GiB"
    return [*running_run(), launcher(log_tail=log.splitlines(), observed_at=at(1))]


def _restarted_long_ago() -> list[BusEvent]:
    # An OOM restart an hour before the watcher first saw the pod: history, not news.
    old = running(restarts=1, last_reason="OOMKilled", last_exit_code=137, last_finished_at=at(-60))
    return [*running_run(), worker(0, containers=(old,), observed_at=at(1))]


def _preempted_and_replaced() -> list[BusEvent]:
    # SIGKILLed after the grace period of a preemption, then recreated under a new uid at once.
    return [
        *running_run(),
        worker(1, phase="Failed", ready=False, containers=(terminated("Error", 137),), observed_at=at(1)),
        worker(
            1,
            phase="Failed",
            ready=False,
            containers=(terminated("Error", 137),),
            change="DELETED",
            observed_at=at(1, 1),
        ),
        worker(1, uid="uid-pi-worker-1-again", created_at=at(1, 1), observed_at=at(1, 2)),
        job("Succeeded", observed_at=at(4)),
    ]


def _retried_into_success() -> list[BusEvent]:
    # The launcher failed once (restartPolicy OnFailure), was restarted, and the job succeeded.
    restarted = running("launcher", restarts=1, last_reason="Error", last_exit_code=1, last_finished_at=at(1))
    return [
        *running_run(),
        failed_launcher("RuntimeError: connection to the dataset server reset\n", observed_at=at(1)),
        launcher(containers=(restarted,), observed_at=at(1, 10)),
        job("Succeeded", observed_at=at(3)),
    ]


def _clean_launcher_exit() -> list[BusEvent]:
    return [*running_run(), failed_launcher("done\n", observed_at=at(1)), job("Failed", observed_at=at(1))]


def _waiting_for_scale_up() -> list[BusEvent]:
    # Every pod that waits for a node being added is rejected by the scheduler first.
    return [
        job("Pending"),
        *(worker(i) for i in range(3)),
        pending_worker(3, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        k8s_event(
            "TriggeredScaleUp",
            "pod triggered scale-up: [{gpu-pool 3->4 (max: 6)}]",
            involved="pi-worker-3",
            event_type="Normal",
            observed_at=at(0, 12),
        ),
    ]


def _rejected_then_placed_within_grace() -> list[BusEvent]:
    return [
        job("Pending"),
        *(worker(i) for i in range(3)),
        pending_worker(3, "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
        worker(3, observed_at=at(0, 25)),
    ]


NEAR_MISSES: dict[str, tuple[Callable[[], list[BusEvent]], tuple[float, ...]]] = {
    "completed-worker": (_completed_worker, (2,)),
    "failed-scheduling-then-scheduled": (_failed_scheduling_then_scheduled, (3,)),
    "waiting-for-scale-up-is-not-unschedulable": (_waiting_for_scale_up, (0.2, 1, 10)),
    "rejected-then-placed-within-autoscaler-grace": (_rejected_then_placed_within_grace, (1,)),
    "healthy-launcher-output": (_healthy_launcher_output, (2,)),
    "oom-restart-long-ago": (_restarted_long_ago, (2,)),
    "healthy-run-for-hours-without-log-feed": (running_run, (30, 60, 120, 240)),
    "preempted-worker-replaced-at-once": (_preempted_and_replaced, (2, 5)),
    "worker-retried-into-success": (_retried_into_success, (2, 5)),
}

# Runs that do fail, for a reason no rule recognises: the catch-all explains them, nothing else.
FAILED_UNEXPLAINED: dict[str, Callable[[], list[BusEvent]]] = {
    "exit-137-error-is-a-sigkill-not-an-oom": _sigkill_without_oom_evidence,
    "worker-failure-propagates-in-time": _worker_failure_propagates,
    "launcher-error-without-known-pattern": _clean_launcher_exit,
}


@pytest.mark.parametrize(("events", "ticks"), NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
def test_no_finding(events: Callable[[], list[BusEvent]], ticks: tuple[float, ...]) -> None:
    engine = RuleEngine()

    changes = replay(engine, events(), *(at(minutes) for minutes in ticks))

    assert changes == []


@pytest.mark.parametrize("events", FAILED_UNEXPLAINED.values(), ids=FAILED_UNEXPLAINED.keys())
def test_only_the_catch_all_speaks_for_an_unexplained_failure(events: Callable[[], list[BusEvent]]) -> None:
    engine = RuleEngine()

    changes = replay(engine, events(), at(2), at(5))

    assert [(f.rule, f.status) for f in changes] == [("failed", "firing")]


@pytest.mark.parametrize("every_minutes", [5, 10, 29], ids=["every-5m", "every-10m", "every-29m"])
def test_slow_but_progressing_job_is_not_a_hang(every_minutes: int) -> None:
    engine = RuleEngine()
    replay(engine, running_run())
    lines: list[str] = []
    changes = []
    for minute in range(0, 240, every_minutes):
        lines.append(f"step {minute} loss {3 - minute / 100:.2f}")
        changes += engine.observe(launcher(log_tail=lines[-5:], observed_at=at(minute)), at(minute))
        changes += engine.tick(at(minute + every_minutes - 0.5))

    assert changes == []


def test_job_that_stops_logging_is_a_hang_after_the_threshold() -> None:
    engine = RuleEngine()
    replay(engine, [*running_run(), launcher(log_tail=("step 1",), observed_at=at(1))])

    assert engine.tick(at(30)) == []
    (finding,) = engine.tick(at(31))
    assert finding.rule == "hang-progress"


def test_pod_transitions_count_as_progress() -> None:
    engine = RuleEngine()
    replay(engine, [*running_run(), launcher(log_tail=("step 1",), observed_at=at(1))])
    engine.observe(worker(1, ready=False, observed_at=at(20)), at(20))
    engine.observe(worker(1, ready=True, observed_at=at(21)), at(21))

    assert engine.tick(at(50)) == []
    assert [f.rule for f in engine.tick(at(51))] == ["hang-progress"]


def test_kueue_queued_job_within_threshold_is_not_a_hang() -> None:
    engine = RuleEngine()
    queued = job("Suspended", labels={"kueue.x-k8s.io/queue-name": "team-a-gpu"})

    changes = replay(engine, [queued], at(10), at(14, 59))

    assert changes == []


def test_launcher_waiting_within_threshold_is_not_a_hang() -> None:
    engine = RuleEngine()
    starting: list[BusEvent] = [job("Running"), launcher(), *(worker(i, ready=i < 3) for i in range(4))]

    changes = replay(engine, [*starting, worker(3, observed_at=at(4, 50))], at(4, 59), at(10))

    assert changes == []


def test_log_probes_with_new_lines_keep_a_long_job_from_being_a_hang() -> None:
    engine = RuleEngine()
    replay(engine, running_run())
    changes = []
    for minute in range(5, 240, 5):
        changes += engine.observe(log_probe(12, observed_at=at(minute)), at(minute))
        changes += engine.tick(at(minute + 4))

    assert changes == []


def test_log_probes_that_find_nothing_new_are_a_hang_after_the_threshold() -> None:
    engine = RuleEngine()
    replay(engine, [*running_run(), log_probe(40, observed_at=at(1))])
    for minute in range(6, 30, 5):
        engine.observe(log_probe(0, observed_at=at(minute)), at(minute))

    assert engine.tick(at(30, 59)) == []
    (finding,) = engine.tick(at(31))
    assert finding.rule == "hang-progress"
