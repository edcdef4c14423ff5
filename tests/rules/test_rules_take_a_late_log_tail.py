"""A log tail that arrives late (the watcher's first read was refused) is folded into the pod it
belongs to: the same pod version again, with its tail, replaces the catch-all ``failed`` with the
cause the log names. The same version without a tail, or the tail again, changes nothing."""

from __future__ import annotations

from consumers.rules import RuleEngine
from controller.contract.events import message_id
from controller.testing.events import at, failed_launcher, job, replay, running_run
from tests.rules.corpus_replay import load

MPICH = next(e for e in load() if e.id == "mpich-hydu-sock-connect-connection-refused")
"""A real MPICH failure from the corpus: the launcher's log names a refused connection."""


def test_the_same_pod_version_with_its_tail_supersedes_the_catch_all() -> None:
    engine = RuleEngine()
    run = running_run()  # first: resourceVersions grow in the order events are built
    with_tail = failed_launcher(MPICH.text, observed_at=at(1))
    without_tail = with_tail.model_copy(update={"log_tail": ()})
    first = replay(engine, [*run, without_tail, job("Failed", observed_at=at(1, 5))])
    assert [(f.rule, f.status) for f in first] == [("failed", "firing")]
    assert first[0].root_cause == "Launcher exited with code 1 (a general error)"

    late = with_tail.model_copy(update={"observed_at": at(2)})
    assert message_id(late) != message_id(without_tail), "a message of its own, not a duplicate"
    second = replay(engine, [late])

    assert [(f.rule, f.status, f.superseded_by) for f in second] == [
        ("mpi-comm", "firing", None),
        ("failed", "resolved", "mpi-comm"),
    ]
    assert replay(engine, [late, without_tail]) == [], "the tail again, or the version again: nothing new"
    assert [f.rule for f in engine.firing()] == ["mpi-comm"]
