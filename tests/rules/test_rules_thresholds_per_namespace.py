"""Time-based rules fire exactly at their threshold, which a namespace may override."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from consumers.rules import RuleEngine, RuleThresholds, ThresholdOverride
from controller.testing.events import at, job, ref, replay, running_run, terminated, worker


def test_pending_14_minutes_is_quiet_and_16_minutes_fires() -> None:
    engine = RuleEngine(RuleThresholds(hang_pending_s=900))
    replay(engine, [job("Pending")])

    assert engine.tick(at(14)) == []
    (finding,) = engine.tick(at(16))

    assert (finding.rule, finding.root_cause) == ("hang-pending", "Pending 16m: no pods created yet")
    assert finding.first_seen == at(16)


def test_namespace_override_delays_only_its_own_runs() -> None:
    thresholds = RuleThresholds(overrides={"research": ThresholdOverride(hang_pending_s=3600)})
    engine = RuleEngine(thresholds)
    research = ref(namespace="research", name="sweep", uid="uid-research")
    replay(engine, [job("Pending"), job("Pending", job=research)])

    fired = engine.tick(at(20))

    assert [(f.job.namespace, f.rule) for f in fired] == [("team-a", "hang-pending")]
    assert [(f.job.namespace, f.root_cause) for f in engine.tick(at(61))] == [
        ("research", "Pending 1h1m: no pods created yet")
    ]


def test_override_of_failure_propagation() -> None:
    engine = RuleEngine(RuleThresholds(overrides={"team-a": ThresholdOverride(failure_propagation_s=120)}))
    replay(
        engine,
        [
            *running_run(),
            worker(2, phase="Failed", ready=False, containers=(terminated("Error", 1),), observed_at=at(1)),
        ],
    )

    assert engine.tick(at(2)) == []
    assert [f.root_cause for f in engine.tick(at(3))] == [
        "Worker 2 failed 2m ago but the job is still Running"
    ]


def test_for_namespace_applies_only_the_fields_set() -> None:
    thresholds = RuleThresholds(hang_init_s=600, overrides={"research": ThresholdOverride(hang_pending_s=60)})

    research = thresholds.for_namespace("research")
    other = thresholds.for_namespace("team-b")

    assert (research.hang_pending_s, research.hang_init_s, research.overrides) == (60, 600, {})
    assert (other.hang_pending_s, other.hang_init_s) == (900, 600)


def test_thresholds_load_from_plain_data_like_settings_do() -> None:
    thresholds = RuleThresholds.model_validate(
        {"hang_progress_s": "1200", "overrides": {"ml": {"hang_init_s": 30}}}
    )

    assert thresholds.for_namespace("ml").hang_init_s == 30
    assert thresholds.hang_progress_s == 1200


@pytest.mark.parametrize(
    "data",
    [{"hang_pending_s": 0}, {"overrides": {"ml": {"hang_pendng_s": 60}}}, {"hang_init_s": -5}],
    ids=["zero-threshold", "misspelt-override", "negative-threshold"],
)
def test_invalid_thresholds_are_rejected(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        RuleThresholds.model_validate(data)
