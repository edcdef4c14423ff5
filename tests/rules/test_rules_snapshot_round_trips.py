"""A snapshot holds a run exactly: what the engine knows of a run, written and read back, is the
same run — every field of the state (a field added later must be added to the snapshot too),
its firing findings and its revision counters."""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from consumers.rules import RuleEngine
from consumers.rules.engine import HeldRun
from consumers.rules.snapshot import _run_from_json, _run_to_json
from consumers.rules.state import PodState, RunState
from consumers.rules.stateformat import run_state_from_dict, run_state_to_dict
from controller.testing.events import JOB_UID, at, replay, running_run, terminated, worker


def _engine() -> RuleEngine:
    engine = RuleEngine()
    replay(
        engine,
        [
            *running_run(),
            worker(
                2, phase="Failed", ready=False, containers=(terminated("OOMKilled", 137),), observed_at=at(1)
            ),
        ],
    )
    return engine


def test_every_field_of_a_run_state_is_in_its_snapshot() -> None:
    state = _engine().state(JOB_UID)
    assert state is not None
    data = run_state_to_dict(state)
    assert set(data) == {f.name for f in fields(RunState) if f.compare}
    assert set(data["pods"][0]) == {f.name for f in fields(PodState)}  # type: ignore[index]
    assert run_state_from_dict(data) == state


def test_a_run_read_back_keeps_its_findings_and_revisions() -> None:
    engine = _engine()
    run = engine.held[JOB_UID]
    run.revisions["oom"] = 7

    back = _run_from_json(_run_to_json(run))

    assert back.state == run.state and back.touched_at == run.touched_at
    assert back.firing == run.firing and [f.rule for f in back.firing.values()] == ["oom"]
    assert back.keys == run.keys and back.revisions == run.revisions
    assert isinstance(back, HeldRun)


def test_a_key_whose_events_do_not_validate_is_refused() -> None:
    run = _engine().held[JOB_UID]
    data = json.loads(_run_to_json(run))
    data["state"]["pods"][0]["observed"]["phase"] = "Exploded"  # not a pod phase

    with pytest.raises(ValueError, match="phase"):
        _run_from_json(json.dumps(data).encode())


def test_a_key_whose_finding_does_not_validate_is_refused() -> None:
    run = _engine().held[JOB_UID]
    data = json.loads(_run_to_json(run))
    del data["firing"]["oom"]["severity"]

    with pytest.raises(ValueError, match="severity"):
        _run_from_json(json.dumps(data).encode())
