"""No failed run without a finding: the catch-all ``failed`` says what is known, and steps aside.

When a run fails and no rule knows why, the finding names the pod and container that ended
first, its exit code and what that code means, and the line of its log that says what went
wrong — the exception closing a Python traceback, not the noise after it. A specific
finding that arrives later supersedes it; a run retried into success sheds it.
"""

from __future__ import annotations

import itertools

import pytest

from consumers.rules import RuleEngine, RuleThresholds
from consumers.rules.tails import last_error
from controller.contract.events import BusEvent, Condition, ContainerState
from controller.testing.events import (
    T0,
    at,
    failed_launcher,
    job,
    k8s_event,
    launcher,
    replay,
    running,
    running_run,
    terminated,
    worker,
)

TRACEBACK = """\
[1,9]<stderr>:Traceback (most recent call last):
[1,9]<stderr>:  File "/app/train.py", line 212, in <module>
[1,9]<stderr>:    main()
[1,9]<stderr>:  File "/app/train.py", line 118, in main
[1,9]<stderr>:    loss = model(batch.to(device))
[1,9]<stderr>:RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!
[1,9]<stderr>:wandb: Waiting for W&B process to finish... (failed 1).
[1,9]<stderr>:wandb: 🚀 View run at https://wandb.example.com/team-a/llm/runs/x1
[1,9]<stderr>:wandb: Synced 5 W&B file(s), 0 media file(s), 0 artifact file(s) and 0 other file(s)
"""


_LATER = itertools.count(10**9)  # pod updates built before the run's own events are still newer


def _worker_ended(
    index: int, code: int, *, log: str = "", minute: float = 1, **container: object
) -> BusEvent:
    ended = ContainerState(
        name="worker", state="terminated", reason="Error", exit_code=code, finished_at=at(minute), **container
    )
    return worker(
        index,
        phase="Failed",
        ready=False,
        containers=(ended,),
        log_tail=log.splitlines(),
        observed_at=at(minute),
        resource_version=str(next(_LATER)),
    )


def _failed_run(*pods: BusEvent) -> list[BusEvent]:
    return [*running_run(), *pods, job("Failed", observed_at=at(2))]


def _only(engine: RuleEngine) -> tuple[str, str]:
    (finding,) = engine.firing()
    return finding.rule, finding.root_cause


EXIT_CODES = {
    2: "Worker 2 exited with code 2 (misuse of a command: bad arguments or a shell syntax error)",
    126: "Worker 2 exited with code 126 (the command is not executable)",
    127: "Worker 2 exited with code 127 (command not found)",
    134: "Worker 2 was killed by SIGABRT (exit code 134: aborted: a failed assertion, abort() or an "
    "uncaught C++ exception)",
    137: "Worker 2 was killed by SIGKILL (exit code 137: killed from outside: the OOM killer, a deletion "
    "or preemption past its grace period, or kill -9)",
    143: "Worker 2 was killed by SIGTERM (exit code 143: asked to stop: a deletion, a preemption, or the "
    "launcher stopping the ranks after another failed)",
    1: "Worker 2 exited with code 1 (a general error)",
    42: "Worker 2 exited with code 42 (an error code of the program)",
}


@pytest.mark.parametrize(("code", "sentence"), EXIT_CODES.items(), ids=[str(c) for c in EXIT_CODES])
def test_the_exit_code_is_named_and_explained(code: int, sentence: str) -> None:
    engine = RuleEngine()

    replay(engine, _failed_run(_worker_ended(2, code)))

    assert _only(engine) == ("failed", sentence)


def test_the_exception_of_the_traceback_is_the_sentence_not_the_noise_after_it() -> None:
    engine = RuleEngine()

    replay(engine, _failed_run(_worker_ended(2, 1, log=TRACEBACK)))

    (finding,) = engine.firing()
    assert finding.root_cause == (
        "Worker 2 exited with code 1: RuntimeError: Expected all tensors to be on the same device, but "
        "found at least two devices, cuda:0 and cpu!"
    )
    assert [(e.source, e.field) for e in finding.evidence][:3] == [
        ("pod/pi-worker-2", "containers[worker].state.terminated.exitCode"),
        ("pod/pi-worker-2", "containers[worker].state.terminated.reason"),
        ("pod/pi-worker-2", "containers[worker].state.terminated.finishedAt"),
    ]
    assert any(e.field == "log" and e.value.startswith("RuntimeError: Expected") for e in finding.evidence)
    assert "kubectl -n team-a logs pi-worker-2 -c worker --previous" in finding.remediation[0]


@pytest.mark.parametrize(
    ("tail", "error"),
    [
        (
            TRACEBACK,
            "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
        ),
        (
            "Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nKeyError: 'labels'\n\n"
            "During handling of the above exception, another exception occurred:\n\n"
            'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n'
            "ValueError: batch has no labels\n",
            "ValueError: batch has no labels",
        ),
        (
            '[rank1]: Traceback (most recent call last):\n[rank1]:   File "t.py", line 9, in <module>\n'
            "[rank1]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.\n"
            'Traceback (most recent call last):\n  File "/usr/bin/torchrun", line 8, in <module>\n'
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n",
            "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.",
        ),
        (
            "step 100 loss 2.3\nFATAL: dataset shard 7 missing\nflushing logs\n",
            "FATAL: dataset shard 7 missing",
        ),
        ("step 100 loss 2.3\nstep 200 loss 2.1\n", None),
    ],
    ids=["traceback-then-noise", "chained", "rank-traceback-over-the-launcher-wrapper", "error-line", "none"],
)
def test_the_line_that_says_what_went_wrong(tail: str, error: str | None) -> None:
    assert last_error(tuple(tail.splitlines())) == error


def test_the_pod_that_ended_first_is_named_not_those_stopped_after_it() -> None:
    engine = RuleEngine()
    run = running_run()
    launcher_failed = failed_launcher("ValueError: unknown optimizer 'adamw8bit'", observed_at=at(1))
    stopped = [_worker_ended(i, 143, minute=1.2) for i in (0, 1)]

    replay(engine, [*run, launcher_failed, *stopped, job("Failed", observed_at=at(2))])

    assert _only(engine) == (
        "failed",
        "Launcher exited with code 1: ValueError: unknown optimizer 'adamw8bit'; it ended first, then worker 0 "
        "and others",
    )


def test_an_init_container_is_named() -> None:
    engine = RuleEngine()
    fetch = ContainerState(name="fetch-data", init=True, state="terminated", reason="Error", exit_code=127)
    waiting = ContainerState(name="worker", state="waiting", reason="PodInitializing")

    replay(
        engine,
        _failed_run(
            worker(
                1,
                phase="Failed",
                ready=False,
                containers=(fetch, waiting),
                observed_at=at(1),
                resource_version=str(next(_LATER)),
            )
        ),
    )

    assert _only(engine) == (
        "failed",
        "Worker 1 (init container fetch-data) exited with code 127 (command not found)",
    )


def test_without_a_container_to_blame_the_jobs_condition_speaks() -> None:
    engine = RuleEngine()
    failed = Condition(
        type="Failed",
        status="True",
        reason="BackoffLimitExceeded/",
        message="Job has reached the specified backoff limit: ",
    )

    replay(engine, [job("Pending"), job("Failed", conditions=(failed,), observed_at=at(3))])

    assert _only(engine) == (
        "failed",
        "The job failed: BackoffLimitExceeded: Job has reached the specified backoff limit",
    )


def test_a_job_failed_before_its_pods_ended_waits_for_them_and_names_their_cause() -> None:
    # The job's condition and its pods come on separate watches: the OOM-killed worker's update
    # (read with its log tail) arrives after the job's Failed. No catch-all goes out meanwhile.
    engine = RuleEngine(RuleThresholds(failed_hold_s=10))
    replay(engine, [*running_run(), job("Failed", observed_at=at(2))])
    assert engine.firing() == [] and engine.tick(at(2, seconds=9)) == []

    oom = ContainerState(
        name="worker", state="terminated", reason="OOMKilled", exit_code=137, finished_at=at(2)
    )
    late = worker(2, phase="Failed", ready=False, containers=(oom,), observed_at=at(2, seconds=9.5))
    changes = engine.observe(late, at(2, seconds=9.5))

    assert [(f.rule, f.status) for f in changes] == [("oom", "firing")]
    assert engine.tick(at(5)) == [] and [f.rule for f in engine.firing()] == ["oom"]


def test_a_job_failed_while_its_pods_still_run_speaks_after_the_hold() -> None:
    engine = RuleEngine(RuleThresholds(failed_hold_s=10))
    replay(engine, [*running_run(), job("Failed", observed_at=at(2))])
    assert engine.tick(at(2, seconds=9)) == []

    (fired,) = engine.tick(at(2, seconds=10))

    assert (fired.rule, fired.status) == ("failed", "firing")
    assert fired.root_cause.startswith("The job failed")


def test_a_specific_finding_arriving_later_supersedes_it() -> None:
    engine = RuleEngine()
    (first,) = replay(engine, _failed_run(_worker_ended(2, 137)))
    assert first.rule == "failed"

    changes = engine.observe(
        k8s_event(
            "OOMKilling",
            "Memory cgroup out of memory: Killed process 4242 (python)",
            involved="pi-worker-2",
            observed_at=at(3),
        ),
        at(3),
    )

    assert [(f.rule, f.status, f.superseded_by) for f in changes] == [
        ("oom", "firing", None),
        ("failed", "resolved", "oom"),
    ]


def test_a_live_run_speaks_once_a_container_has_been_down_for_the_propagation_time() -> None:
    engine = RuleEngine(RuleThresholds(failure_propagation_s=30))
    replay(
        engine,
        [
            *running_run(),
            failed_launcher(
                "ImportError: libcudart.so.12: cannot open shared object file", observed_at=at(1)
            ),
        ],
    )

    assert engine.tick(at(1, 29)) == []
    (finding,) = engine.tick(at(1, 30))
    assert (finding.rule, finding.root_cause) == (
        "failed",
        "Launcher exited with code 1: ImportError: libcudart.so.12: cannot open shared object file",
    )


def test_a_failed_worker_of_a_live_run_is_the_failure_propagation_not_a_second_finding() -> None:
    engine = RuleEngine()

    replay(engine, [*running_run(), _worker_ended(2, 1)], at(1, 30))

    assert [f.rule for f in engine.firing()] == ["failure-propagation"]


def test_a_run_retried_into_success_sheds_it() -> None:
    engine = RuleEngine()
    replay(
        engine,
        [*running_run(), failed_launcher("OSError: dataset server unreachable", observed_at=at(1))],
        at(1, 40),
    )
    assert [f.rule for f in engine.firing()] == ["failed"]

    restarted = running("launcher", restarts=1, last_reason="Error", last_exit_code=1, last_finished_at=at(1))
    changes = replay(
        engine, [launcher(containers=(restarted,), observed_at=at(2)), job("Succeeded", observed_at=at(30))]
    )

    assert [(f.rule, f.status) for f in changes] == [("failed", "resolved")]
    assert engine.firing() == []


def test_a_succeeded_run_has_no_failed_finding_even_with_a_failed_container_left() -> None:
    engine = RuleEngine()
    leftover = worker(
        3, phase="Failed", ready=False, containers=(terminated("Error", 143),), observed_at=at(5)
    )

    changes = replay(engine, [*running_run(), job("Succeeded", observed_at=at(5)), leftover], at(10))

    assert changes == []


def test_the_finished_time_of_the_container_orders_the_pods() -> None:
    engine = RuleEngine()
    later = _worker_ended(0, 1, log="ValueError: second", minute=1.5)
    earlier = ContainerState(name="worker", state="terminated", reason="Error", exit_code=1, finished_at=T0)
    first = worker(
        3,
        phase="Failed",
        ready=False,
        containers=(earlier,),
        log_tail=("ValueError: first",),
        observed_at=at(1.6),
        resource_version=str(next(_LATER)),
    )

    replay(engine, _failed_run(later, first))

    assert _only(engine)[1].startswith(
        "Worker 3 exited with code 1: ValueError: first; it ended first, then worker 0"
    )
