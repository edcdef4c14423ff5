"""The correlator keeps the conditions of the nodes that host a watched pod, and tells each run
on a node each change of them once: a condition that goes bad, one that clears; a node of
another workload is not kept, a degraded node listed before our pod is held until the pod
lands (a start lists both at once), and a node is forgotten once no pod of ours runs on it."""

from __future__ import annotations

from datetime import UTC, datetime

from controller.contract.events import NODE_CONDITION_SOURCE, K8sEventObserved
from controller.testing import objects as k
from tests.clocks import ManualClock
from watchers.correlating import Correlator, Observation

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
DEADLOCK = (
    "KernelDeadlock",
    "True",
    "KernelHasDeadlock",
    "kernel: task blocked for more than 120 seconds",
    "2026-11-20T10:05:00Z",
)
CLEARED = ("KernelDeadlock", "False", "KernelHasNoDeadlock", "kernel has no deadlock", "2026-11-20T10:09:00Z")


def observe(correlator: Correlator, kind: str, obj: k.Obj, change: str = "ADDED") -> list[K8sEventObserved]:
    found = correlator.observe(Observation(kind, change, obj, NOW))  # type: ignore[arg-type]
    return [e for e in found if isinstance(e, K8sEventObserved)]


def _run_on(correlator: Correlator, name: str, nodes: list[str]) -> k.Obj:
    job = k.mpijob(name, workers=len(nodes))
    observe(correlator, "job", job)
    for i, node in enumerate(nodes):
        observe(correlator, "pod", k.pod(job, "worker", i, node=node))
    return job


def test_a_condition_that_goes_bad_reaches_each_run_on_the_node_once() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    one = _run_on(correlator, "one", ["gpu-1", "gpu-2"])
    two = _run_on(correlator, "two", ["gpu-1"])
    assert observe(correlator, "node", k.node("gpu-1")) == []  # healthy: nothing to tell

    told = observe(correlator, "node", k.node("gpu-1", DEADLOCK), "MODIFIED")

    assert sorted(e.job.uid for e in told) == sorted([one["metadata"]["uid"], two["metadata"]["uid"]])
    event = told[0]
    assert (event.involved.kind, event.involved.name, event.reason) == ("Node", "gpu-1", "KernelDeadlock")
    assert event.source == NODE_CONDITION_SOURCE and event.event_type == "Warning"
    assert event.condition is not None and event.condition.reason == "KernelHasDeadlock"
    assert event.first_timestamp == datetime(2026, 11, 20, 10, 5, tzinfo=UTC)
    assert "task blocked" in event.message
    # a heartbeat of the same node (a new resourceVersion, nothing changed) tells nothing new
    assert observe(correlator, "node", k.node("gpu-1", DEADLOCK), "MODIFIED") == []
    cleared = observe(correlator, "node", k.node("gpu-1", CLEARED), "MODIFIED")
    assert {(e.event_type, e.condition.status if e.condition else None) for e in cleared} == {
        ("Normal", "False")
    }


def test_a_node_no_watched_pod_uses_is_neither_kept_nor_told() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    _run_on(correlator, "one", ["gpu-1"])
    assert observe(correlator, "node", k.node("gpu-7", DEADLOCK)) == []
    assert observe(correlator, "node", k.node("gpu-8")) == []
    assert set(correlator.node_health.kept) == set()
    assert set(correlator.node_health.waiting) == {"gpu-7"}  # degraded: held for the grace period only


def test_a_degraded_node_listed_before_the_pod_is_told_when_the_pod_lands() -> None:
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    observe(correlator, "node", k.node("gpu-1", DEADLOCK))
    job = k.mpijob("late", workers=1)
    observe(correlator, "job", job)

    told = observe(correlator, "pod", k.pod(job, "worker", 0, node="gpu-1"))

    assert [(e.reason, e.job.uid) for e in told] == [("KernelDeadlock", job["metadata"]["uid"])]
    assert set(correlator.node_health.kept) == {"gpu-1"} and not correlator.node_health.waiting


def test_a_held_node_is_forgotten_after_the_grace_period() -> None:
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    observe(correlator, "node", k.node("gpu-1", DEADLOCK))
    clock.now = 31
    correlator.expire()
    job = k.mpijob("later", workers=1)
    observe(correlator, "job", job)
    assert observe(correlator, "pod", k.pod(job, "worker", 0, node="gpu-1")) == []


def test_a_second_run_landing_on_a_degraded_node_is_told_and_the_same_change_keeps_its_id() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    first = _run_on(correlator, "first", ["gpu-1"])
    (told,) = observe(correlator, "node", k.node("gpu-1", DEADLOCK), "MODIFIED")
    assert told.job.uid == first["metadata"]["uid"]
    second = k.mpijob("second", workers=1)
    observe(correlator, "job", second)

    landed = observe(correlator, "pod", k.pod(second, "worker", 0, node="gpu-1"))

    assert [e.job.uid for e in landed] == [second["metadata"]["uid"]]
    again = Correlator(pending_ttl_s=30, clock=ManualClock())  # a restarted watcher reads it again
    observe(again, "job", first)
    observe(again, "pod", k.pod(first, "worker", 0, node="gpu-1"))
    (retold,) = observe(again, "node", k.node("gpu-1", DEADLOCK))
    assert retold.uid == told.uid  # the same message id: JetStream and the rules take it once


def test_a_node_is_let_go_when_its_last_watched_pod_is_gone() -> None:
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    job = k.mpijob("short", workers=1)
    observe(correlator, "job", job)
    pod = k.pod(job, "worker", 0, node="gpu-1")
    observe(correlator, "pod", pod)
    observe(correlator, "node", k.node("gpu-1"))
    assert set(correlator.node_health.kept) == {"gpu-1"}
    observe(correlator, "pod", pod, "DELETED")
    clock.now = 31
    correlator.expire()
    assert correlator.node_health.kept == {}


def test_a_run_is_told_on_landing_only_when_none_of_its_pods_is_on_the_node_already() -> None:
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    one = k.mpijob("one", workers=2)
    observe(correlator, "job", one)
    first, second = k.pod(one, "worker", 0, node="gpu-1"), k.pod(one, "worker", 1, node="gpu-2")
    observe(correlator, "pod", first)
    observe(correlator, "pod", second)
    two = _run_on(correlator, "two", ["gpu-1"])  # keeps gpu-1 watched throughout
    observe(correlator, "node", k.node("gpu-1", DEADLOCK), "MODIFIED")
    moved = k.pod(one, "worker", 1, node="gpu-1")

    assert observe(correlator, "pod", moved, "MODIFIED") == []  # its run has a pod there already

    observe(correlator, "pod", first, "DELETED")
    observe(correlator, "pod", moved, "DELETED")
    clock.now = 31
    correlator.expire()
    assert set(correlator.run_pods) == {("gpu-1", two["metadata"]["uid"])}  # forgotten pods leave no trace
    landed = observe(correlator, "pod", k.pod(one, "worker", 0, node="gpu-1"))
    assert [(e.reason, e.job.uid) for e in landed] == [("KernelDeadlock", one["metadata"]["uid"])]
