"""A rank's own error line is the cause, whichever event the rules judge first.

A worker's training script raises; mpirun sees rank 0 exit non-zero and aborts the job. The
watcher delivers the worker's end (with its log tail), the launcher's end (mpirun's summary)
and the job's ``Failed`` in whatever order the API server and the bus give them — one at a
time or in one batch — and a log tail may only arrive later, re-delivered for the same pod
version. Whatever the order, the finding names the error the rank printed (a Python exception
of any type, a CUDA, NCCL or MPI error line), not just "exited with code 1".
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from consumers.rules import RuleEngine
from controller.contract.events import BusEvent, PodObserved
from controller.contract.findings import Finding
from controller.testing.events import at, failed_launcher, job, running_run, terminated, worker

MPIRUN_NONZERO = """
-------------------------------------------------------
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
-------------------------------------------------------
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[47159,1],0]
  Exit code:    1
--------------------------------------------------------------------------
"""

TRACEBACK = """Traceback (most recent call last):
  File "/workspace/train.py", line 88, in <module>
    main()
  File "/workspace/train.py", line 61, in main
    label = classes[wnid]
{error}"""

# The error line a rank prints, per family; each is what the finding must name.
ERRORS = {
    "python-keyerror": ("KeyError: 'n01440764'", True),
    "python-any-type": ("imagenet.data.ShardMissing: shard 7 of 64 is missing", True),
    "cuda": ("CUDA error: invalid device ordinal", False),
    "nccl": ("NCCL error in: /opt/pytorch/nccl.cpp:1270, invalid usage, NCCL version 2.18.1", False),
    "mpi": ("Fatal error in PMPI_Allreduce: Invalid count, error stack:", False),
}


def _worker_ended(
    error: str, traceback: bool, *, tail: bool = True, version: str | None = None
) -> PodObserved:
    """The worker's end: a version newer than any built so far, unless ``version`` repeats one."""
    text = TRACEBACK.format(error=error) if traceback else f"step 1200 loss 2.31\n{error}"
    return worker(
        0,
        phase="Failed",
        ready=False,
        containers=(terminated("Error", 1),),
        log_tail=text.splitlines() if tail else (),
        observed_at=at(1),
        resource_version=version,
    )


def _failure(error: str, traceback: bool) -> list[BusEvent]:
    return [
        _worker_ended(error, traceback),
        failed_launcher(MPIRUN_NONZERO, observed_at=at(1, 5)),
        job("Failed", observed_at=at(1, 10)),
    ]


def _judge(engine: RuleEngine, events: Sequence[BusEvent], batch: bool) -> list[Finding]:
    if batch:
        return engine.observe_all((e, e.observed_at) for e in events)
    return [change for e in events for change in engine.observe(e, e.observed_at)]


def _named(engine: RuleEngine, error: str) -> Finding:
    (finding,) = engine.firing()
    assert error in finding.root_cause, finding.root_cause
    return finding


ORDERS = list(itertools.permutations(range(3)))


@pytest.mark.parametrize("batch", [False, True], ids=["one-by-one", "one-batch"])
@pytest.mark.parametrize("order", ORDERS, ids=["-".join(map(str, o)) for o in ORDERS])
def test_the_workers_exception_is_named_whichever_end_is_judged_first(
    order: tuple[int, ...], batch: bool
) -> None:
    engine = RuleEngine()
    _judge(engine, running_run(), batch)
    failure = _failure("KeyError: 'n01440764'", True)

    _judge(engine, [failure[i] for i in order], batch)

    finding = _named(engine, "KeyError: 'n01440764'")
    assert "Rank 0" in finding.root_cause or "Worker 0" in finding.root_cause


@pytest.mark.parametrize("family", list(ERRORS))
@pytest.mark.parametrize("launcher_first", [False, True], ids=["worker-first", "launcher-first"])
def test_every_family_of_error_line_is_named(family: str, launcher_first: bool) -> None:
    error, traceback = ERRORS[family]
    engine = RuleEngine()
    run = running_run()
    ended, launcher_failed, failed = _failure(error, traceback)
    first = [launcher_failed, ended] if launcher_first else [ended, launcher_failed]

    _judge(engine, [*run, *first, failed], batch=False)

    _named(engine, error)


def test_a_rank_error_forwarded_to_the_launcher_is_named_for_that_rank() -> None:
    """Under mpirun the rank's output reaches the launcher tagged; another rank's noise is not it."""
    engine = RuleEngine()
    run = running_run()
    tagged = [
        "[1,3]<stderr>:UserWarning: this DataLoader will create 8 worker processes",
        "[1,0]<stderr>:Traceback (most recent call last):",
        '[1,0]<stderr>:  File "/workspace/train.py", line 61, in main',
        "[1,0]<stderr>:KeyError: 'n01440764'",
        "[1,3]<stderr>:RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId failed",
    ]
    launcher_failed = failed_launcher("\n".join([*tagged, *MPIRUN_NONZERO.splitlines()]), observed_at=at(1))
    bare_worker = worker(
        0, phase="Failed", ready=False, containers=(terminated("Error", 1),), observed_at=at(1)
    )

    _judge(engine, [*run, bare_worker, launcher_failed, job("Failed", observed_at=at(1, 5))], batch=False)

    finding = _named(engine, "KeyError: 'n01440764'")
    assert finding.rule == "mpi-abort"


@pytest.mark.parametrize("judged_before", ["launcher", "job-failed"])
def test_a_tail_that_arrives_later_for_the_same_pod_version_upgrades_the_finding(judged_before: str) -> None:
    engine = RuleEngine()
    run = running_run()
    error = "KeyError: 'n01440764'"
    without_tail = _worker_ended(error, True, tail=False)
    later = [failed_launcher(MPIRUN_NONZERO, observed_at=at(1, 5))]
    if judged_before == "job-failed":
        later = [job("Failed", observed_at=at(1, 10)), *later]
    else:
        later.append(job("Failed", observed_at=at(1, 10)))
    _judge(engine, [*run, without_tail, *later], batch=False)
    (before,) = engine.firing()
    assert error not in before.root_cause

    redelivered = _worker_ended(error, True, version=without_tail.resource_version)
    changes = engine.observe(redelivered, at(2))

    finding = _named(engine, error)
    assert finding in changes
    assert finding.id != before.id or finding.revision > before.revision
    if finding.id != before.id:
        assert any(c.id == before.id and c.superseded_by == finding.rule for c in changes)


def test_a_redelivered_event_without_a_tail_keeps_the_tail_already_held() -> None:
    engine = RuleEngine()
    error = "KeyError: 'n01440764'"
    run = running_run()
    _judge(engine, [*run, *_failure(error, True)], batch=False)
    before = _named(engine, error)

    again = _worker_ended(error, True, tail=False)
    assert engine.observe(again, at(3)) == []

    assert _named(engine, error).revision == before.revision


def test_a_catch_all_published_before_the_tail_is_republished_with_its_error() -> None:
    """No launcher and no rule that knows the error: the catch-all speaks, and says more once it can."""
    engine = RuleEngine()
    run = [e for e in running_run() if not (isinstance(e, PodObserved) and e.role == "launcher")]
    error = "imagenet.data.ShardMissing: shard 7 of 64 is missing"
    without_tail = _worker_ended(error, True, tail=False)
    _judge(engine, [*run, without_tail, job("Failed", observed_at=at(1, 10))], batch=False)
    (before,) = engine.firing()
    assert (before.rule, before.root_cause) == ("failed", "Worker 0 exited with code 1 (a general error)")

    changes = engine.observe(_worker_ended(error, True, version=without_tail.resource_version), at(2))

    assert [(c.rule, c.revision, c.root_cause) for c in changes] == [
        ("failed", before.revision + 1, f"Worker 0 exited with code 1: {error}")
    ]
