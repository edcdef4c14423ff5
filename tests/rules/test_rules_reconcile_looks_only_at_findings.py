"""A warm start's reconcile looks only at the runs' findings, held or on the bus: the id of a
finding is a uuid5 of its run and rule, and computing one for every rule of every run held was
most of the reconcile of a partition of 600 runs (``benchmarks/README.md``, "``up``'s start,
phase by phase"). What it returns is unchanged (tests/rules/test_rules_reconcile_with_published_findings.py)."""

from __future__ import annotations

import pytest

import consumers.rules.engine as engine_module
from consumers.rules import RuleEngine
from controller.contract.events import BusEvent
from controller.contract.findings import RuleId
from controller.testing.events import at, job, ref, replay, running_run, terminated, worker

QUIET_RUNS = 30


def _oom_run() -> list[BusEvent]:
    return [
        *running_run(),
        worker(2, phase="Failed", ready=False, containers=(terminated("OOMKilled", 137),), observed_at=at(1)),
    ]


def _quiet_run(n: int) -> list[BusEvent]:
    run = ref(name=f"quiet-{n}", uid=f"uid-quiet-{n}")
    return [job("Running", job=run), *(worker(i, job=run, uid=f"uid-quiet-{n}-w{i}") for i in range(2))]


def test_only_the_pairs_with_a_finding_have_their_id_computed(monkeypatch: pytest.MonkeyPatch) -> None:
    (oom,) = replay(RuleEngine(), _oom_run())
    engine = RuleEngine()
    replay(engine, [event for n in range(QUIET_RUNS) for event in _quiet_run(n)])
    replay(engine, _oom_run())
    assert len(engine) == QUIET_RUNS + 1 and [f.rule for f in engine.firing()] == ["oom"]
    computed: list[tuple[str, RuleId]] = []
    finding_id = engine_module.finding_id

    def counted(job_uid: str, rule: RuleId) -> str:
        computed.append((job_uid, rule))
        return finding_id(job_uid, rule)

    monkeypatch.setattr(engine_module, "finding_id", counted)

    assert engine.reconcile({oom.id: oom}, at(2)) == []  # the bus has it: nothing owed
    assert set(computed) == {(oom.job.uid, "oom")}  # its id checked and looked up; no other pair's
