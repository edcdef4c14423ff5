"""oom-predicted warns of a working set on course for its limit and says when it gets there; the
oom kill that follows says whether it was foreseen. straggler names the worker whose GPUs run
below its peers' for the whole window, and its likely reason (a GPU throttled in the window,
memory near its limit or its node under MemoryPressure). Both stay quiet on their near-misses: a plateau, a
sawtooth, a climb too slow to matter; warm-up, a checkpoint on every worker, an evaluation on
rank 0 only."""

from __future__ import annotations

import random
from datetime import datetime

import pytest

from consumers.rules import RuleThresholds
from consumers.rules.trend import fit
from controller.contract.events import BusEvent, GpuHealth, GpuUsage, UsageObserved
from controller.testing.events import REF, at, pod_usage, running_run, terminated, usage, worker
from tests.rules.judging import firing, reading
from watchers.nodes import ConditionSeen, condition_event

BUSY = [92.0] * 20


def _noisy(values: list[float], spread: float, seed: int = 7) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.uniform(-spread, spread) for v in values]


# ------------------------------------------------------------------ the trend itself


def test_the_trend_is_robust_to_a_spike_and_tells_a_climb_from_a_sawtooth() -> None:
    climb = [(at(i), 10.0 + i) for i in range(10)]
    spiked = [*climb[:5], (at(5), 500.0), *climb[6:]]
    steady, with_spike = fit(climb), fit(spiked)
    assert steady is not None and with_spike is not None
    assert steady.slope_per_s == pytest.approx(1 / 60) and steady.tau == 1.0
    assert with_spike.slope_per_s == pytest.approx(1 / 60)  # least squares would swing by far more
    saw = fit([(at(i), [8.0, 10.0, 12.0, 14.0][i % 4]) for i in range(16)])
    assert saw is not None and saw.tau < 0.3


# ------------------------------------------------------------------ oom-predicted


def test_a_working_set_on_course_for_its_limit_is_warned_of_with_the_projected_time() -> None:
    creeping = [8.0 + 0.3 * i for i in range(20)]  # 13.7 GiB of 16 at 10:30, +0.3 GiB/min
    found = firing([*running_run(), reading([BUSY] * 4, {1: creeping})], at(30))

    finding = found["oom-predicted"]
    assert finding.severity == "warning"
    assert finding.root_cause == (
        "Worker 1's memory working set is growing 0.30 GiB/min (13.7 GiB of its 16.0 GiB limit): at this "
        "rate it reaches the limit around 10:37 UTC, 7m after the reading"
    )
    assert [e.field for e in finding.evidence] == [
        "resources.limits.memory",
        "usage.memory.trend",
        "usage.memory.workingSet",
    ]
    assert finding.evidence[1].value == "0.30 GiB/min, tau 1.00"


def test_a_noisy_leak_is_still_seen() -> None:
    leak = _noisy([9.0 + 0.3 * i for i in range(20)], spread=0.4)
    assert "oom-predicted" in firing([*running_run(), reading([BUSY] * 4, {2: leak})], at(30))


@pytest.mark.parametrize(
    "gib",
    [
        pytest.param(_noisy([8.0 + 0.6 * i for i in range(10)] + [14.0] * 10, 0.1), id="rose-then-plateaued"),
        pytest.param([8.0, 10.0, 12.0, 14.5] * 5, id="sawtooth-of-allocations-and-frees"),
        pytest.param([9.0, 15.0] * 10, id="fast-alloc-free-near-the-limit"),
        pytest.param([8.0 + 0.05 * i for i in range(20)], id="climbing-but-hours-from-the-limit"),
        pytest.param([15.0] * 20, id="flat-at-94-percent"),
        pytest.param([8.0] * 16 + [12.0] * 4, id="one-step-up-then-flat"),
    ],
)
def test_near_misses_of_oom_predicted_stay_quiet(gib: list[float]) -> None:
    assert "oom-predicted" not in firing([*running_run(), reading([BUSY] * 4, {0: gib})], at(30))


def test_too_few_points_is_no_forecast() -> None:
    short = reading([[92.0] * 3] * 4, {0: [13.0, 14.0, 15.0]})
    assert "oom-predicted" not in firing([*running_run(), short], at(30))


def test_the_horizon_is_a_setting() -> None:
    slow = [8.0 + 0.1 * i for i in range(20)]  # 9.9 GiB, 61 min from the limit
    events = [*running_run(), reading([BUSY] * 4, {0: slow})]
    assert "oom-predicted" not in firing(events, at(30))
    assert "oom-predicted" in firing(events, at(30), RuleThresholds(oom_horizon_s=3900))


def _killed(index: int) -> BusEvent:
    container = terminated("OOMKilled", 137).model_copy(update={"finished_at": at(31)})
    return worker(index, phase="Failed", ready=False, containers=(container,), observed_at=at(31))


def test_the_oom_kill_says_it_was_foreseen_and_the_warning_steps_aside() -> None:
    creeping = [8.0 + 0.4 * i for i in range(20)]  # 15.6 GiB at 10:30
    run = running_run()
    found = firing([*run, reading([BUSY] * 4, {1: creeping}), _killed(1)], at(31))

    assert "oom-predicted" not in found  # the kill it foresaw explains it
    assert found["oom"].root_cause == (
        "Worker 1 failed: out of memory (limit 16Gi); foreseen at 10:25 UTC, 6m before the kill, "
        "by its working-set trend"
    )


def test_an_unforeseen_oom_kill_says_so() -> None:
    sudden = [6.0] * 19 + [6.5]  # a sudden allocation, not a trend
    run = running_run()
    found = firing([*run, reading([BUSY] * 4, {1: sudden}), _killed(1)], at(31))
    assert found["oom"].root_cause == (
        "Worker 1 failed: out of memory (limit 16Gi); its working-set trend did not foresee it"
    )


# ------------------------------------------------------------------ straggler


def test_a_worker_consistently_below_its_peers_is_named_with_how_much_and_since_when() -> None:
    slow = [90.0] * 4 + [55.0] * 16  # behind from 10:15 on
    found = firing([*running_run(), reading([BUSY, BUSY, slow, BUSY])], at(30))

    finding = found["straggler"]
    assert finding.severity == "warning"
    assert finding.root_cause == (
        "Worker 2 is a straggler: its GPUs have run at 55 % while its peers' ran at 92 % for 15m (since 10:15 UTC)"
    )
    assert finding.evidence[0].source == "pod/pi-worker-2"
    assert finding.evidence[0].field == "usage.gpu.utilization"


def test_the_likely_reason_is_given_when_the_reading_shows_one() -> None:
    slow = [50.0] * 20
    pressed = [15.6] * 20
    found = firing([*running_run(), reading([BUSY, slow, BUSY, BUSY], {1: pressed})], at(30))
    assert found["straggler"].root_cause.endswith("; its memory working set is at 98% of its 16.0 GiB limit")


def _every(period: int, length: int, during: float, otherwise: float) -> list[float]:
    return [during if i % period < length else otherwise for i in range(20)]


@pytest.mark.parametrize(
    "utils",
    [
        pytest.param([BUSY, BUSY, [40.0] * 8 + [92.0] * 12, BUSY], id="warm-up"),
        pytest.param([_every(5, 2, 3.0, 92.0)] * 4, id="checkpoint-pause-on-every-worker"),
        pytest.param(
            [BUSY, *[_every(5, 2, 10.0, 92.0)] * 3],
            id="evaluation-on-rank-0-only",
        ),
        pytest.param([BUSY, [60.0] * 20, [60.0] * 20, BUSY], id="two-workers-behind-is-no-one-straggler"),
        pytest.param([BUSY, BUSY, [80.0] * 20, BUSY], id="twelve-points-below-under-the-gap"),
        pytest.param([BUSY, BUSY, _every(4, 2, 50.0, 92.0), BUSY], id="behind-half-the-time"),
        pytest.param([[92.0] * 10, [92.0] * 10, [50.0] * 10, [92.0] * 10], id="a-young-run"),
    ],
)
def test_near_misses_of_straggler_stay_quiet(utils: list[list[float]]) -> None:
    assert "straggler" not in firing([*running_run(), reading(utils)], at(30))


def test_a_straggler_through_checkpoint_pauses_is_still_named() -> None:
    peers = _every(5, 1, 3.0, 92.0)
    slow = _every(5, 1, 3.0, 50.0)
    found = firing([*running_run(), reading([peers, slow, peers, peers])], at(30))
    assert found["straggler"].root_cause.startswith("Worker 1 is a straggler: its GPUs have run at 50 %")


def test_an_idle_worker_is_gpu_idle_not_a_straggler() -> None:
    idle = [90.0] * 5 + [1.0] * 15
    found = firing([*running_run(), reading([BUSY, BUSY, idle, BUSY])], at(30))
    assert "gpu-idle" in found and "straggler" not in found


def test_a_curve_too_coarse_for_a_trend_makes_no_claim_either_way() -> None:
    coarse = pod_usage(1, util=[92.0] * 8, memory_gib=[6.0] * 7 + [15.9], end=at(30), step_s=480.0)
    found = firing([*running_run(), usage(coarse, observed_at=at(30)), _killed(1)], at(31))
    assert found["oom"].root_cause == "Worker 1 failed: out of memory (limit 16Gi)"


def _throttled(reading: BusEvent, index: int, curve: tuple[tuple[datetime, float], ...]) -> BusEvent:
    """``reading`` with worker ``index``'s GPU 0 reporting DCGM's throttle reasons ``curve``."""
    assert isinstance(reading, UsageObserved)
    health = GpuHealth(throttle_reasons=curve)
    pods = tuple(
        p.model_copy(update={"gpus": (GpuUsage(gpu="0", uuid="GPU-s", health=health),)})
        if p.index == index
        else p
        for p in reading.pods
    )
    return reading.model_copy(update={"pods": pods})


def test_a_throttled_gpu_in_the_window_is_the_likely_reason() -> None:
    slow = [50.0] * 20
    hot = ((at(11), 0.0), (at(20), 64.0), (at(30), 64.0))  # hardware thermal slowdown from 10:20
    found = firing([*running_run(), _throttled(reading([BUSY, slow, BUSY, BUSY]), 1, hot)], at(30))
    assert found["straggler"].root_cause.endswith(
        "; its GPU 0 had its clocks held down by the hardware (hardware thermal slowdown) for 67% of the window"
    )


def test_a_throttle_of_seconds_is_no_reason() -> None:
    slow = [50.0] * 20
    blip = ((at(11), 0.0), (at(22), 64.0), (at(22, 20), 0.0), (at(30), 0.0))
    found = firing([*running_run(), _throttled(reading([BUSY, slow, BUSY, BUSY]), 1, blip)], at(30))
    assert found["straggler"].root_cause.endswith("(since 10:15 UTC)")


def test_memory_pressure_on_the_workers_node_is_the_likely_reason() -> None:
    slow = [50.0] * 20
    seen = ConditionSeen(
        "gpu-node-1", "uid-n1", "7", "MemoryPressure", "True", "KubeletHasInsufficientMemory", "", at(12)
    )
    pressure = condition_event(seen, REF, at(12))
    found = firing([*running_run(), pressure, reading([BUSY, slow, BUSY, BUSY])], at(30))
    assert found["straggler"].root_cause.endswith(
        "; its node gpu-node-1 reports MemoryPressure since 10:12 UTC"
    )
    assert "node-degraded" in found  # told beside it: the node's pressure slows, it does not stop
