"""gpu-idle and memory-near-limit fire on what a straggler or a creeping pod looks like, and stay
quiet on the near-misses (every GPU idle at a checkpoint, a working set flat near its limit);
an OOM kill carries the memory curve read before it."""

from __future__ import annotations

import pytest

from consumers.rules.state import RunState
from consumers.rules.stateformat import run_state_from_dict, run_state_to_dict
from controller.testing.events import at, job, pod_usage, running_run, terminated, usage, worker
from tests.rules.judging import firing, reading

BUSY = [92.0] * 20
IDLE = [0.0] * 20


def test_one_worker_idle_while_the_others_work_is_named() -> None:
    straggler = [90.0] * 5 + [1.0] * 15  # idle for the last 14 minutes
    found = firing([*running_run(), reading([BUSY, BUSY, straggler, BUSY])], at(30))

    finding = found["gpu-idle"]
    assert finding.root_cause == "Worker 2's GPUs have been idle for 14m while the other workers' run at 92 %"
    assert finding.severity == "warning"
    assert finding.evidence[0].source == "pod/pi-worker-2"
    assert finding.evidence[0].value.startswith("90 90 90 90 90 1 1")


@pytest.mark.parametrize(
    "utils",
    [
        pytest.param([IDLE, IDLE, IDLE, IDLE], id="every-gpu-idle-at-a-checkpoint"),
        pytest.param([BUSY, BUSY, [90.0] * 12 + [1.0] * 8, BUSY], id="idle-for-7m-under-the-10m-threshold"),
        pytest.param([[30.0] * 20, BUSY, IDLE, BUSY], id="another-worker-not-busy-either"),
    ],
)
def test_near_misses_of_gpu_idle_stay_quiet(utils: list[list[float]]) -> None:
    assert "gpu-idle" not in firing([*running_run(), reading(utils)], at(30))


def test_gpu_idle_is_not_judged_once_the_run_has_finished() -> None:
    events = [*running_run(), reading([BUSY, BUSY, IDLE, BUSY]), job("Succeeded", observed_at=at(31))]
    assert "gpu-idle" not in firing(events, at(31))


def test_memory_creeping_to_its_limit_is_named_with_its_curve() -> None:
    creeping = [12.0 + 0.2 * i for i in range(20)]  # 12.0 → 15.8 GiB of 16
    found = firing([*running_run(), reading([BUSY] * 4, {1: creeping})], at(30))

    finding = found["memory-near-limit"]
    assert finding.root_cause == "Worker 1 is at 15.8 GiB of its 16.0 GiB memory limit (99%) and rising"
    curve = next(e for e in finding.evidence if e.field == "usage.memory.workingSet")
    assert curve.source == "pod/pi-worker-1"
    assert curve.value.startswith("12.0 12.2 12.4") and curve.value.endswith("15.8 GiB (10:11→10:30 UTC)")


@pytest.mark.parametrize(
    "gib",
    [
        pytest.param([13.6] * 20, id="flat-at-85-percent-for-hours"),
        pytest.param([15.2] * 20, id="flat-at-95-percent"),
        pytest.param([8.0 + 0.3 * i for i in range(20)], id="rising-but-under-90-percent"),
    ],
)
def test_near_misses_of_memory_near_limit_stay_quiet(gib: list[float]) -> None:
    assert "memory-near-limit" not in firing([*running_run(), reading([BUSY] * 4, {0: gib})], at(30))


def test_an_oom_kill_carries_the_memory_curve_read_before_it() -> None:
    creeping = [14.0 + 0.1 * i for i in range(20)]
    run = running_run()  # (before the kill: resourceVersions increase as events are built)
    killed = worker(
        1, phase="Failed", ready=False, containers=(terminated("OOMKilled", 137),), observed_at=at(31)
    )
    found = firing([*run, reading([BUSY] * 4, {1: creeping}), killed], at(31))

    assert "memory-near-limit" not in found  # the kill it warned of explains it
    curve = next(e for e in found["oom"].evidence if e.field == "usage.memory.workingSet")
    assert curve.source == "pod/pi-worker-1" and curve.value.endswith("15.9 GiB (10:11→10:30 UTC)")


def test_a_late_or_repeated_reading_changes_nothing_and_survives_a_snapshot() -> None:
    state = RunState.for_event(running_run()[0])
    newer, older = reading([BUSY, IDLE]), usage(pod_usage(1, util=BUSY, end=at(10)), observed_at=at(10))
    assert state.apply(newer) is True
    assert state.apply(older) is False and state.apply(newer) is False
    restored = run_state_from_dict(run_state_to_dict(state))
    assert restored.usage == state.usage
