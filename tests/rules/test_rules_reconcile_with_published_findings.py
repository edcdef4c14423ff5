"""After a warm start the engine agrees with the bus: it publishes what the bus lacks, resolves
what the bus still shows firing, and never reuses a revision the bus has already seen."""

from __future__ import annotations

from consumers.rules import RuleEngine
from controller.contract.events import BusEvent
from controller.contract.findings import Finding
from controller.testing.events import at, job, replay, running_run, terminated, worker


def _oom_run() -> list[BusEvent]:
    return [
        *running_run(),
        worker(2, phase="Failed", ready=False, containers=(terminated("OOMKilled", 137),), observed_at=at(1)),
    ]


def _rebuilt(events: list[BusEvent]) -> RuleEngine:
    """An engine that observed ``events`` without publishing, as a warm start does."""
    engine = RuleEngine()
    replay(engine, events)
    return engine


def _published(*findings: Finding) -> dict[str, Finding]:
    return {f.id: f for f in findings}


def test_finding_the_bus_already_shows_is_not_published_again() -> None:
    (oom,) = replay(RuleEngine(), _oom_run())
    engine = _rebuilt(_oom_run())

    assert engine.reconcile(_published(oom), at(2)) == []
    assert [f.rule for f in engine.firing()] == ["oom"]


def test_finding_the_bus_never_got_is_published() -> None:
    engine = _rebuilt(_oom_run())

    (owed,) = engine.reconcile({}, at(2))

    assert (owed.rule, owed.status, owed.revision) == ("oom", "firing", 2)
    assert owed.root_cause == "Worker 2 failed: out of memory (limit 16Gi)"


def test_finding_the_bus_shows_firing_but_the_engine_does_not_is_resolved() -> None:
    (oom,) = replay(RuleEngine(), _oom_run())
    engine = _rebuilt(running_run())  # the OOM did not survive in what was replayed

    (owed,) = engine.reconcile(_published(oom), at(2))

    assert (owed.id, owed.status, owed.revision, owed.resolved_at) == (oom.id, "resolved", 2, at(2))


def test_revisions_continue_after_the_highest_published() -> None:
    (oom,) = replay(RuleEngine(), _oom_run())
    seen_later = oom.model_copy(update={"revision": 7})
    engine = _rebuilt(_oom_run())
    engine.reconcile(_published(seen_later), at(2))

    # the worker comes back under a new pod: the finding changes (or resolves) as revision 8
    changes = replay(
        engine,
        [worker(2, uid="uid-pi-worker-2-b", observed_at=at(3)), job("Running", observed_at=at(3))],
        at(30),
    )

    assert changes and all(f.revision >= 8 for f in changes)


def test_runs_the_engine_no_longer_holds_are_left_alone() -> None:
    (oom,) = replay(RuleEngine(), _oom_run())

    assert RuleEngine().reconcile(_published(oom), at(2)) == []
