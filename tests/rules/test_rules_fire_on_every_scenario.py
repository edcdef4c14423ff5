"""Every scenario file raises exactly the findings its README story promises, and nothing else.

Each file goes the way a live cluster's watch events go: read as observations, correlated
with their run, folded into the engine at their own ``observed_at``, with a tick at every
event's time before it is observed (the time-based rules see each quiet gap at its longest)
and a last tick a second after the story ends. ``firing`` is what the user is told at the
end; ``fired`` is everything published along the way, so a rule that must stay quiet may
not fire and clear again either.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from consumers.rules import RuleEngine, RuleThresholds
from controller.contract.findings import RuleId
from tests.conftest import SCENARIOS
from watchers.correlating import Correlator
from watchers.recording import read_observations

EXPECTED: dict[str, frozenset[RuleId]] = {
    "mpijob-succeeded.jsonl": frozenset(),
    "mpijob-worker-oomkilled.jsonl": frozenset({"oom"}),
    "mpijob-imagepullbackoff.jsonl": frozenset({"image-pull"}),
    "mpijob-unschedulable-gpus.jsonl": frozenset({"unschedulable"}),
    "trainjob-mpi-succeeded.jsonl": frozenset(),
    "trainjob-torch-rank-failed.jsonl": frozenset({"mpi-abort"}),
    "mpijob-gpu-oom.jsonl": frozenset({"gpu-oom"}),
    "mpijob-train-retried.jsonl": frozenset({"gpu-oom"}),
    "mpijob-ssh-connection-refused.jsonl": frozenset({"mpi-comm"}),
    "mpijob-mpi-abort.jsonl": frozenset({"mpi-abort"}),
    "mpijob-hydra-failure.jsonl": frozenset({"mpi-comm"}),
    "mpijob-crashloop.jsonl": frozenset({"crashloop"}),
    "mpijob-evicted.jsonl": frozenset({"evicted"}),
    "mpijob-node-lost.jsonl": frozenset({"node-lost"}),
    "mpijob-pending-long.jsonl": frozenset({"hang-pending"}),
    "nearmiss-sigkill-not-oom.jsonl": frozenset(),
    "nearmiss-slow-but-progressing.jsonl": frozenset(),
    "nearmiss-kueue-queued.jsonl": frozenset(),
    # the training-operator kinds: a success and a typical failure each
    "pytorchjob-succeeded.jsonl": frozenset(),
    "pytorchjob-rendezvous-timeout.jsonl": frozenset({"rendezvous"}),
    "tfjob-succeeded.jsonl": frozenset(),
    "tfjob-ps-oomkilled.jsonl": frozenset({"oom"}),
    "xgboostjob-succeeded.jsonl": frozenset(),
    "xgboostjob-imagepullbackoff.jsonl": frozenset({"image-pull"}),
    "paddlejob-succeeded.jsonl": frozenset(),
    "paddlejob-unschedulable-gpus.jsonl": frozenset({"unschedulable"}),
    "jaxjob-succeeded.jsonl": frozenset(),
    "jaxjob-worker-error.jsonl": frozenset({"failed"}),
}

THRESHOLDS = {
    "default": RuleThresholds(),
    # Judge hang-progress on pod transitions alone, as the slow-but-progressing story does:
    # without this, progress_needs_log_feed keeps that rule quiet on every capture.
    "pod-transitions-as-progress": RuleThresholds(progress_needs_log_feed=False),
}

END_MARGIN = timedelta(seconds=1)


def run_story(path: Path, thresholds: RuleThresholds) -> tuple[set[RuleId], set[RuleId]]:
    """(rules firing at the end, rules that ever fired) for one scenario file."""
    now: list[datetime] = []

    def story_clock() -> float:  # the correlator's clock is the story's own
        return now[-1].timestamp()

    correlator = Correlator(30, story_clock)
    engine = RuleEngine(thresholds)
    fired: set[RuleId] = set()
    for observation in read_observations(path):
        now.append(observation.observed_at)
        for event in correlator.observe(observation):
            changes = engine.tick(event.observed_at) + engine.observe(event, event.observed_at)
            fired |= {f.rule for f in changes if f.status == "firing"}
    assert now, f"{path.name} holds no observations"
    fired |= {f.rule for f in engine.tick(max(now) + END_MARGIN) if f.status == "firing"}
    return {f.rule for f in engine.firing()}, fired


def test_every_scenario_file_has_an_expectation() -> None:
    assert {p.name for p in SCENARIOS.glob("*.jsonl")} == set(EXPECTED)


@pytest.mark.parametrize("thresholds", THRESHOLDS.values(), ids=THRESHOLDS.keys())
@pytest.mark.parametrize(("name", "expected"), EXPECTED.items(), ids=EXPECTED.keys())
def test_scenario_raises_exactly_its_findings(
    name: str, expected: frozenset[RuleId], thresholds: RuleThresholds
) -> None:
    firing, fired = run_story(SCENARIOS / name, thresholds)

    assert firing == expected
    assert fired == expected
