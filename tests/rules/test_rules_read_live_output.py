"""The rules read a running job's output as it is printed (``LogSeen`` from the live log reader).

A fatal line fires at once; any other signature is evidence — a warning while the run goes on,
resolved when the run's output goes on past it, the verdict when its pod ends non-zero, the job
fails or the run falls silent. The failure-time tail that follows a live finding adds no second
one, and a hang names the rank it waits for.
"""

from __future__ import annotations

import json

from consumers.rules import RuleEngine
from consumers.rules.state import MAX_LIVE_CHARS, MAX_LIVE_LINES
from consumers.rules.stateformat import run_state_from_dict, run_state_to_dict
from controller.contract.events import BusEvent, JobSpecSummary
from controller.contract.findings import Finding
from controller.testing.events import (
    at,
    failed_launcher,
    job,
    launcher,
    log_seen,
    replay,
    running_run,
    spec,
    terminated,
    worker,
)

OOM = (
    "[1,3]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB. "
    "GPU 3 has a total capacity of 79.15 GiB of which 1.71 GiB is free."
)
WATCHDOG = (
    "[1,{rank}]<stderr>:[rank{rank}]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank {rank}] "
    "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
    "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out."
)
COUNTERS = (
    "[1,{rank}]<stderr>:[rank{rank}]:[E321 02:07:08.465150152 ProcessGroupNCCL.cpp:1664] [PG 1 Rank {rank}] "
    "Exception (either an error or timeout) detected by watchdog at work: 1580, last enqueued NCCL work: 1582, "
    "last completed NCCL work: 1579."
)
ABORT = (
    "[1,5]<stderr>:MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD",
    "[1,5]<stderr>:with errorcode 1.",
)


def _four_ranks() -> list[BusEvent]:
    """The default MPIJob with 2 workers of 2 slots: ranks 0-3."""
    small = JobSpecSummary.model_validate({**spec(workers=2).model_dump(), "slots_per_worker": 2})
    return [job("Running", job_spec=small), launcher(), worker(0), worker(1)]


def _firing(changes: list[Finding], rule: str) -> list[Finding]:
    return [f for f in changes if f.rule == rule and f.status == "firing"]


def test_a_fatal_watchdog_line_fires_at_once_and_names_the_rank_missing_from_the_counters() -> None:
    engine = RuleEngine()
    replay(engine, _four_ranks())
    lines = [line.format(rank=r) for r in (0, 1, 3) for line in (WATCHDOG, COUNTERS)]
    changes = engine.observe(log_seen(*lines, observed_at=at(10)), at(10))

    (finding,) = _firing(changes, "mpi-comm")
    assert finding.severity == "critical"
    assert engine.state(finding.job.uid).launcher().phase == "Running"  # type: ignore[union-attr]
    assert "rank 2 never reported the collective" in finding.root_cause
    assert any("Watchdog caught collective operation timeout" in e.value for e in finding.evidence)


def test_a_recovered_cuda_oom_in_a_run_that_succeeds_is_an_observation_that_never_fired() -> None:
    engine = RuleEngine()
    changes = replay(engine, running_run())
    changes += engine.observe(log_seen(OOM, observed_at=at(5)), at(5))
    (seen,) = [f for f in changes if f.rule == "gpu-oom"]
    assert (seen.status, seen.severity) == ("pending", "warning")
    assert seen.root_cause == f'Rank 3 on worker-0 printed "{OOM}" at 10:05:00 UTC; the job is still running'

    went_on = ("[1,3]<stdout>:batch size 16 fits, training on", "[1,0]<stdout>:epoch 1 step 200 loss 2.31")
    changes += engine.observe(log_seen(*went_on, observed_at=at(5, 30), step_s=60), at(6, 30))
    ended = terminated("Completed", 0, name="launcher")
    changes += replay(
        engine,
        [
            launcher(
                observed_at=at(20), phase="Succeeded", ready=False, containers=(ended,), log_tail=(OOM,)
            ),
            job("Succeeded", observed_at=at(20, 5)),
        ],
    )

    assert [f for f in changes if f.status == "firing"] == []
    assert [(f.rule, f.status) for f in changes if f.rule == "gpu-oom"] == [
        ("gpu-oom", "pending"),
        ("gpu-oom", "resolved"),
    ]
    assert engine.firing() == []


def test_a_pending_line_is_the_verdict_once_the_run_falls_silent() -> None:
    engine = RuleEngine()
    replay(engine, running_run())
    engine.observe(log_seen(OOM, observed_at=at(5)), at(5))

    assert engine.tick(at(8)) == []  # three quiet minutes: still only evidence
    (verdict,) = _firing(engine.tick(at(10, 30)), "gpu-oom")

    assert verdict.severity == "critical"
    assert "Rank 3" in verdict.root_cause and "still running" not in verdict.root_cause


def test_the_failure_time_tail_after_a_live_finding_adds_no_second_finding() -> None:
    engine = RuleEngine()
    replay(engine, running_run())
    live = engine.observe(log_seen(*ABORT, observed_at=at(5)), at(5))
    (first,) = _firing(live, "mpi-abort")
    assert first.severity == "critical"

    tail = "\n".join(("[1,0]<stdout>:epoch 1 step 90", *ABORT, "[1,5]<stderr>:NOTE: invoking MPI_ABORT"))
    later = replay(engine, [failed_launcher(tail, observed_at=at(5, 2)), job("Failed", observed_at=at(5, 4))])

    assert [f for f in later if f.rule == "mpi-abort"] == []
    assert [f for f in later if f.status == "firing"] == []
    assert [f.id for f in engine.firing()] == [first.id]


def test_an_observation_becomes_the_verdict_when_its_pod_ends_non_zero_under_the_same_finding() -> None:
    engine = RuleEngine()
    changes = replay(engine, running_run())
    changes += engine.observe(log_seen(OOM, observed_at=at(5)), at(5))
    changes += replay(
        engine,
        [
            failed_launcher(f"{OOM}\n[1,3]<stderr>:Aborted", observed_at=at(5, 1)),
            job("Failed", observed_at=at(5, 3)),
        ],
    )

    oom = [f for f in changes if f.rule == "gpu-oom"]
    assert [(f.status, f.severity) for f in oom] == [("pending", "warning"), ("firing", "critical")]
    assert len({f.id for f in oom}) == 1


def test_a_hang_names_the_rank_whose_output_stopped_first() -> None:
    engine = RuleEngine()
    replay(engine, _four_ranks())
    engine.observe(log_seen("[1,2]<stdout>:step 41", observed_at=at(1)), at(1))
    printing = [f"[1,{r}]<stdout>:step 42" for r in (0, 1, 3)]
    engine.observe(log_seen(*printing, observed_at=at(4)), at(4))

    (hang,) = _firing(engine.tick(at(40)), "hang-progress")

    assert "rank 2's output stopped first" in hang.root_cause


def test_a_hang_names_the_ranks_horovod_reports_missing() -> None:
    engine = RuleEngine()
    replay(engine, _four_ranks())
    engine.observe(log_seen(*(f"[1,{r}]<stdout>:step 7" for r in range(4)), observed_at=at(1)), at(1))
    stall = (
        "[1,1]<stderr>:[2021-02-02 21:19:07.345988: W horovod/common/stall_inspector.cc:105] One or more "
        "tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting "
        "for remainder of ranks for more than 60 seconds. This may indicate that different ranks are trying "
        "to submit different tensors or that only subset of ranks is submitting tensors, which will cause "
        "deadlock. ",
        "[1,1]<stderr>:Missing ranks:",
        "[1,1]<stderr>:3: [DistributedSGD_Allreduce/HorovodAllreduce_grads_0]",
    )
    changes: list[Finding] = []
    for minute in range(5, 45, 5):  # repeated every few minutes: not progress
        changes += engine.observe(log_seen(*stall, observed_at=at(minute)), at(minute))

    (hang,) = _firing(changes, "hang-progress")
    assert hang.first_seen == at(35)  # 34 minutes after the last step
    assert "Horovod's stall inspector names rank 3 as missing" in hang.root_cause


def test_lines_seen_live_and_what_they_are_worth_survive_a_snapshot() -> None:
    engine = RuleEngine()
    replay(engine, running_run())
    engine.observe(log_seen(OOM, "[1,3]<stderr>:  frame 0", observed_at=at(5)), at(5))
    engine.observe(log_seen("[1,0]<stdout>:step 9", observed_at=at(7)), at(7))  # went on: recovered
    engine.observe(log_seen(*ABORT, observed_at=at(8)), at(8))  # fatal: confirmed
    state = engine.state(running_run()[0].uid)
    assert state is not None

    data = run_state_to_dict(state)
    restored = run_state_from_dict(json.loads(json.dumps(data)))

    assert run_state_to_dict(restored) == data
    launcher_pod = restored.launcher()
    assert launcher_pod is not None
    assert [line.status for line in launcher_pod.live if line.mark.signature] == ["recovered", "confirmed"]
    assert launcher_pod.rank_output.keys() == {0, 3, 5}


def test_a_pod_printing_signatures_all_day_holds_a_bounded_account() -> None:
    engine = RuleEngine()
    replay(engine, running_run())
    for minute in range(300):
        engine.observe(log_seen(*(OOM for _ in range(20)), observed_at=at(minute), step_s=1), at(minute, 20))
    launcher_pod = engine.state(running_run()[0].uid).launcher()  # type: ignore[union-attr]

    assert launcher_pod is not None
    assert len(launcher_pod.live) <= MAX_LIVE_LINES
    assert sum(len(line.mark.line) for line in launcher_pod.live) <= MAX_LIVE_CHARS
    assert launcher_pod.live[-1].mark.at == at(299, 19)  # the latest are kept
