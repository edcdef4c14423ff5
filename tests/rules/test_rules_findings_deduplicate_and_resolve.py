"""A problem is one finding per run and rule: repeated, updated, resolved, superseded, forgotten."""

from __future__ import annotations

from consumers.rules import RuleEngine, RuleThresholds
from controller.contract.events import BusEvent
from controller.contract.findings import finding_id
from controller.testing.events import (
    JOB_UID,
    at,
    failed_launcher,
    job,
    k8s_event,
    launcher,
    ref,
    replay,
    running,
    running_run,
    terminated,
    waiting,
    worker,
)

OOM = (terminated("OOMKilled", 137),)
PULL_BACK_OFF = (waiting("ImagePullBackOff", 'Back-off pulling image "registry.example.com/x:1"'),)
SIGKILLED_RANK = (
    "mpirun noticed that process rank 9 with PID 0 on node pi-worker-1 exited on signal 9 (Killed)."
)


def _oom(index: int, minute: float, second: float = 0) -> BusEvent:
    return worker(index, phase="Failed", ready=False, containers=OOM, observed_at=at(minute, second))


def test_same_oom_observed_twice_is_one_finding() -> None:
    engine = RuleEngine()
    replay(engine, running_run())
    first = engine.observe(_oom(2, 1), at(1))
    duplicate = _oom(2, 1, 10)

    again = engine.observe(duplicate, at(1, 10))
    replayed = engine.observe(duplicate, at(1, 20))  # the very same message redelivered

    assert [f.rule for f in first] == ["oom"]
    assert again == [] and replayed == []
    (held,) = engine.firing()
    assert (held.id, held.revision, held.first_seen, held.last_seen) == (first[0].id, 1, at(1), at(1, 20))


def test_second_pod_with_the_same_problem_updates_the_finding() -> None:
    engine = RuleEngine()
    replay(engine, [*running_run(), _oom(2, 1)])

    (update,) = engine.observe(_oom(3, 1, 10), at(1, 10))

    assert update.root_cause == "Worker 2 failed: out of memory (limit 16Gi); also worker 3"
    assert (update.revision, update.first_seen, update.last_seen) == (2, at(1), at(1, 10))
    assert {e.source for e in update.evidence} == {"pod/pi-worker-2", "pod/pi-worker-3"}


def test_finding_id_is_deterministic_from_job_uid_and_rule() -> None:
    changes = [replay(RuleEngine(), [*running_run(), _oom(2, 1)]) for _ in range(2)]

    assert changes[0][0].id == changes[1][0].id == finding_id(JOB_UID, "oom")
    assert changes[0][0].dedup_key == f"{JOB_UID}/oom"


def test_image_pull_resolves_when_the_pod_starts() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending"), worker(0, phase="Pending", ready=False, containers=PULL_BACK_OFF)])

    (resolved,) = engine.observe(worker(0, observed_at=at(3)), at(3))

    assert (resolved.rule, resolved.status, resolved.resolved_at, resolved.revision) == (
        "image-pull",
        "resolved",
        at(3),
        2,
    )
    assert engine.firing() == []


def test_hang_pending_resolves_when_the_job_starts() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending")], at(16))

    (resolved,) = replay(engine, [*running_run(at(17))])

    assert (resolved.rule, resolved.status) == ("hang-pending", "resolved")


def test_problem_that_comes_back_fires_again_under_the_same_id() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending"), worker(0, phase="Pending", ready=False, containers=PULL_BACK_OFF)])
    (resolved,) = engine.observe(worker(0, observed_at=at(3)), at(3))

    (again,) = engine.observe(
        worker(0, phase="Pending", ready=False, containers=PULL_BACK_OFF, observed_at=at(4)), at(4)
    )

    assert (again.id, again.status, again.revision, again.first_seen) == (resolved.id, "firing", 3, at(4))


def test_finished_run_keeps_its_cause_as_the_verdict() -> None:
    engine = RuleEngine(RuleThresholds(failure_propagation_s=3600))
    hung: list[BusEvent] = [job("Running"), launcher(), *(worker(i, ready=i != 3) for i in range(4))]
    replay(engine, [*hung, _oom(0, 1)], at(6))
    assert {f.rule for f in engine.firing()} == {"oom"}  # the OOM explains the unready mesh

    deleted = worker(0, phase="Failed", ready=False, containers=OOM, change="DELETED", observed_at=at(8))
    changes = replay(engine, [deleted, job("Failed", observed_at=at(9))], at(20))

    assert changes == []
    assert [f.rule for f in engine.firing()] == ["oom"]


def test_stall_resolves_when_the_run_finishes() -> None:
    engine = RuleEngine()
    replay(engine, [job("Pending")], at(16))

    changes = engine.observe(job("Failed", observed_at=at(17)), at(17))

    assert [(f.rule, f.status, f.superseded_by) for f in changes] == [
        ("hang-pending", "resolved", None),
        ("failed", "firing", None),  # no failed run without a finding: the catch-all says what is known
    ]


def test_rank_killed_then_explained_by_the_workers_oom() -> None:
    engine = RuleEngine()
    (abort,) = replay(engine, [*running_run(), failed_launcher(SIGKILLED_RANK, observed_at=at(1))])
    assert abort.root_cause == "Rank 9 on worker-1 was killed by signal 9 (Killed)"

    changes = engine.observe(_oom(1, 1, 5), at(1, 5))

    assert [(f.rule, f.status, f.superseded_by) for f in changes] == [
        ("oom", "firing", None),
        ("mpi-abort", "resolved", "oom"),
    ]


def test_oom_event_arriving_first_hides_the_rank_kill_altogether() -> None:
    engine = RuleEngine()

    changes = replay(
        engine, [*running_run(), _oom(1, 1), failed_launcher(SIGKILLED_RANK, observed_at=at(1, 5))]
    )

    assert [(f.rule, f.status) for f in changes] == [("oom", "firing")]


def test_crash_loop_settles_before_it_resolves() -> None:
    engine = RuleEngine(RuleThresholds(settle_s=300))
    looping = waiting("CrashLoopBackOff", restarts=3, last_reason="Error", last_exit_code=1)
    replay(engine, [*running_run(), worker(1, ready=False, containers=(looping,), observed_at=at(1))])

    back_up = engine.observe(worker(1, containers=(running(restarts=4),), observed_at=at(2)), at(2))
    still = engine.tick(at(5))
    (resolved,) = engine.tick(at(6, 1))

    assert back_up == [] and still == []
    assert (resolved.rule, resolved.status) == ("crashloop", "resolved")


def test_finished_runs_are_forgotten_and_their_late_events_ignored() -> None:
    engine = RuleEngine(RuleThresholds(forget_after_s=600))
    replay(engine, [*running_run(), _oom(2, 1), job("Failed", observed_at=at(2))])

    engine.tick(at(11))
    assert len(engine) == 1
    engine.tick(at(12))
    late = engine.observe(
        worker(2, change="DELETED", phase="Failed", containers=OOM, observed_at=at(13)), at(13)
    )

    assert len(engine) == 0 and late == [] and engine.firing() == []


def test_live_runs_are_kept_however_quiet() -> None:
    engine = RuleEngine(RuleThresholds(forget_after_s=600))
    replay(engine, running_run(), at(600))

    assert engine.state(JOB_UID) is not None


def test_memory_is_bounded_finished_runs_go_first() -> None:
    engine = RuleEngine(RuleThresholds(max_runs=2))
    finished = ref(name="done", uid="uid-done")
    live = ref(name="live", uid="uid-live")
    replay(engine, [job("Succeeded", job=finished), job("Running", job=live)])

    engine.observe(job("Running", job=ref(name="new", uid="uid-new")), at(1))

    assert len(engine) == 2
    assert engine.state("uid-done") is None and engine.state("uid-live") is not None


def test_events_about_other_pods_do_not_touch_a_finding() -> None:
    engine = RuleEngine()
    replay(engine, [*running_run(), _oom(2, 1)])

    changes = replay(
        engine, [k8s_event("Pulled", "Successfully pulled image", event_type="Normal", observed_at=at(1, 9))]
    )

    assert changes == []
    assert [f.last_seen for f in engine.firing()] == [at(1, 9)]
