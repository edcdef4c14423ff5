"""One failure seen in several places is reported once, as its explanation."""

from __future__ import annotations

from consumers.rules import RuleEngine
from controller.contract.events import BusEvent
from controller.testing.events import (
    at,
    failed_launcher,
    job,
    launcher,
    pending_worker,
    replay,
    running_run,
    waiting,
    worker,
)

GPU_SHORTAGE = "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. preemption: not helpful."
UNRESOLVED = "ssh: Could not resolve hostname pi-worker-3.pi.team-a.svc: Name or service not known"


def _rules(engine: RuleEngine) -> list[str]:
    return sorted(f.rule for f in engine.firing())


def test_oom_crash_loop_is_reported_as_oom() -> None:
    engine = RuleEngine()
    looping = waiting("CrashLoopBackOff", restarts=4, last_reason="OOMKilled", last_exit_code=137)

    replay(engine, [*running_run(), worker(1, ready=False, containers=(looping,), observed_at=at(1))])

    assert [f.root_cause for f in engine.firing()] == ["Worker 1 failed: out of memory (limit 16Gi)"]


def test_launcher_crashing_while_a_worker_cannot_pull_is_the_image_pull() -> None:
    engine = RuleEngine()
    back_off = waiting("ImagePullBackOff", 'Back-off pulling image "registry.example.com/x:1"')
    crashing = waiting("CrashLoopBackOff", name="launcher", restarts=3, last_reason="Error", last_exit_code=1)
    events: list[BusEvent] = [
        job("Running"),
        *(worker(i) for i in range(3)),
        worker(3, phase="Pending", ready=False, containers=(back_off,)),
        launcher(ready=False, containers=(crashing,)),
    ]

    replay(engine, events, at(10))

    assert _rules(engine) == ["image-pull"]


def test_unreachable_worker_without_a_node_is_reported_as_unschedulable() -> None:
    engine = RuleEngine()
    events: list[BusEvent] = [
        job("Running"),
        *(worker(i) for i in range(3)),
        pending_worker(3, GPU_SHORTAGE),
        launcher(),
        failed_launcher(UNRESOLVED, observed_at=at(6)),
    ]

    replay(engine, events, at(7))

    assert [f.root_cause for f in engine.firing()] == ["Insufficient GPUs: requested 32, available 24"]


def test_mesh_waiting_for_an_unschedulable_worker_is_not_a_second_finding() -> None:
    engine = RuleEngine()
    events: list[BusEvent] = [
        job("Running"),
        launcher(),
        *(worker(i) for i in range(3)),
        pending_worker(3, GPU_SHORTAGE),
    ]

    replay(engine, events, at(6), at(40))

    assert _rules(engine) == ["unschedulable"]


def test_long_wait_for_capacity_also_says_how_long() -> None:
    engine = RuleEngine()
    events: list[BusEvent] = [job("Pending"), *(worker(i) for i in range(3)), pending_worker(3, GPU_SHORTAGE)]

    replay(engine, events, at(20))

    assert sorted((f.rule, f.root_cause) for f in engine.firing()) == [
        ("hang-pending", "Pending 20m: waiting for 8 GPUs"),
        ("unschedulable", "Insufficient GPUs: requested 32, available 24"),
    ]


def test_lost_daemon_and_the_ranks_it_took_down_are_one_finding() -> None:
    engine = RuleEngine()
    log = (
        "ORTE has lost communication with a remote daemon.\n"
        "  Remote daemon: [[43262,0],2] on node pi-worker-2\n"
        "mpirun noticed that process rank 16 with PID 0 on node pi-worker-2 exited on signal 9 (Killed)."
    )

    replay(engine, [*running_run(), failed_launcher(log, observed_at=at(1))])

    assert _rules(engine) == ["mpi-comm"]
