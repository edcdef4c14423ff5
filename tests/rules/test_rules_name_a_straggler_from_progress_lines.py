"""straggler reads the step counters ranks print (tqdm and Keras bars, Megatron, DeepSpeed, a
trainer's logged dict, plain loops) and names the one rank whose counter climbs slower than its
peers'; it stays quiet for warm-up, a checkpoint every rank pauses for, an evaluation the others
wait through, and counters that only differ by noise."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from consumers.rules.progress import cumulative, step_of
from consumers.rules.state import RunState
from consumers.rules.stateformat import run_state_from_dict, run_state_to_dict
from controller.contract.events import BusEvent
from controller.testing.events import at, log_seen, pod_usage, running_run, usage
from tests.rules.judging import firing

RANKS = (0, 8, 16, 24)  # slotsPerWorker 8: one rank on each of workers 0-3
BATCH_S = 30.0


@pytest.mark.parametrize(
    ("line", "step"),
    [
        ("Epoch 1:  37%|███▋      | 370/1000 [02:45<04:41,  2.24it/s, loss=0.412, v_num=0]", 370),
        (" 120/1875 [====>.........................] - ETA: 1:02 - loss: 0.4512", 120),
        (
            " iteration      100/    5000 | consumed samples:        12800 | elapsed time per iteration (ms): 812.4 |",
            100,
        ),
        (
            "[2026-11-20 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=40, skipped=0, lr=[0.0001]",
            40,
        ),
        ("{'loss': 0.5123, 'learning_rate': 4.9e-05, 'epoch': 0.37, 'step': 250}", 250),
        ('{"global_step": 77, "train_loss": 1.02}', 77),
        ("Step 300: loss = 1.234", 300),
        ("iter 12 | loss 3.2", 12),
        ("Epoch 3/10", 3),
    ],
)
def test_the_counters_trainers_print_are_read(line: str, step: int) -> None:
    assert step_of(line) == step


@pytest.mark.parametrize(
    "line",
    [
        "loaded 3/4 shards",
        "2026/11/20 10:00:00 starting",
        "Step function compiled",
        "Epoch 3/10 finished in 5 s",
    ],
)
def test_lines_that_are_no_counter_are_not_read(line: str) -> None:
    assert step_of(line) is None


def test_a_bar_restarted_each_epoch_adds_up() -> None:
    assert cumulative([900, 1000, 100, 400, 1000, 50]) == [900, 1000, 1100, 1400, 2000, 2050]


def _run(steps: Callable[[int, int], int | None], batches: int = 40) -> list[BusEvent]:
    """The default run, then a batch of the launcher's output every 30 s in which each rank prints
    its bar at ``steps(rank, batch)`` (``None``: that rank prints no counter in that batch)."""
    events: list[BusEvent] = list(running_run())
    for b in range(batches):
        lines = [
            f"[1,{rank}]<stdout>:Epoch 0:  50%|█████     | {n}/100000 [01:00<01:00,  2.00it/s]"
            for rank in RANKS
            if (n := steps(rank, b)) is not None
        ]
        lines.append("[1,0]<stdout>:evaluating…")
        events.append(log_seen(*lines, observed_at=at(seconds=b * BATCH_S), step_s=0.01))
    return events


def _noise(rank: int, batch: int) -> int:
    return random.Random(rank * 1000 + batch).randint(-5, 5)


def test_a_rank_whose_counter_climbs_slower_is_named() -> None:
    events = _run(lambda rank, b: b * (36 if rank == 16 else 60))
    found = firing(events, at(20))

    finding = found["straggler"]
    assert finding.root_cause == (
        "Rank 16 on worker-2 is a straggler: its progress lines count 1.20 steps/s while its peers' "
        "count 2.00 (40% slower) over the last 15m"
    )
    assert finding.evidence[0].source == "pod/pi-launcher" and finding.evidence[0].field == "log.progress"


def test_a_slow_rank_is_named_through_epochs_that_restart_the_bar() -> None:
    events = _run(lambda rank, b: (b * (30 if rank == 8 else 60)) % 600)
    assert firing(events, at(20))["straggler"].root_cause.startswith("Rank 8 on worker-1 is a straggler")


def _paused(b: int) -> bool:
    return b % 20 < 4  # two minutes every ten


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(lambda rank, b: b * 60 + _noise(rank, b), id="equal-but-noisy"),
        pytest.param(
            lambda rank, b: (b * 30 if b < 10 else 300 + (b - 10) * 60) if rank == 16 else b * 60,
            id="warm-up-slow-for-5-minutes-then-level",
        ),
        pytest.param(
            lambda rank, b: 60 * sum(1 for x in range(b) if not _paused(x)),
            id="checkpoint-pause-on-every-rank",
        ),
        pytest.param(
            lambda rank, b: (
                None if rank == 0 and _paused(b) else 60 * sum(1 for x in range(b) if not _paused(x))
            ),
            id="evaluation-on-rank-0-the-others-wait",
        ),
        pytest.param(
            lambda rank, b: b * (36 if rank in (8, 16) else 60), id="two-ranks-slow-is-no-one-straggler"
        ),
        pytest.param(lambda rank, b: b * (54 if rank == 16 else 60), id="ten-percent-slower-under-the-ratio"),
        pytest.param(lambda rank, b: None if rank != 0 else b * 60, id="rank-0-alone-prints"),
    ],
)
def test_near_misses_of_a_straggler_by_progress_stay_quiet(steps: Callable[[int, int], int | None]) -> None:
    assert "straggler" not in firing(_run(steps), at(20))


def test_a_young_run_is_not_judged() -> None:
    events = _run(lambda rank, b: b * (36 if rank == 16 else 60), batches=20)  # ten minutes
    assert "straggler" not in firing(events, at(10))


def test_the_counters_survive_a_snapshot() -> None:
    events = _run(lambda rank, b: b * 60, batches=3)
    state = RunState.for_event(events[0])
    for event in events:
        state.apply(event)
    launcher = state.launcher()
    assert launcher is not None and sorted(launcher.progress) == list(RANKS)
    assert [n for _, n in launcher.progress[8]] == [0, 60, 120]
    restored = run_state_from_dict(run_state_to_dict(state))
    assert restored.launcher() is not None and restored.launcher().progress == launcher.progress  # type: ignore[union-attr]


def test_a_slow_start_inside_the_window_is_not_a_straggler() -> None:
    def steps(rank: int, b: int) -> int:
        slow = min(b, 20) * 30 + max(b - 20, 0) * 60  # half speed for its first 10 minutes
        return slow if rank == 16 else b * 60

    assert "straggler" not in firing(_run(steps, batches=28), at(14))


def test_the_slow_rank_s_worker_reading_gives_the_likely_reason() -> None:
    events = _run(lambda rank, b: b * (36 if rank == 16 else 60))
    pressed = pod_usage(2, util=[90.0] * 20, memory_gib=[15.7] * 20, end=at(1))
    events.insert(len(running_run()), usage(pressed, observed_at=at(1)))  # read before it fell behind
    found = firing(events, at(20))
    assert found["straggler"].root_cause.endswith(
        "over the last 15m; its memory working set is at 98% of its 16.0 GiB limit"
    )


def test_a_batch_tells_each_rank_s_last_counter() -> None:
    seen = log_seen(
        "[1,0]<stdout>:step 10",
        "[1,8]<stdout>:step 11",
        "[1,0]<stdout>:step 12",
        "[1,8]<stdout>:saving checkpoint",
        observed_at=at(0),
        step_s=1.0,
    )
    steps = {output.rank: (output.step, output.step_at) for output in seen.ranks}
    assert steps == {0: (12, at(seconds=2)), 8: (11, at(seconds=1))}
