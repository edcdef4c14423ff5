"""Pods and events are attached to their run, even when they arrive before the job."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.contract.events import JobObserved, K8sEventObserved, PodObserved
from controller.testing import objects as k
from tests.clocks import ManualClock
from watchers.correlating import Correlator, Observation
from watchers.normalizing import MalformedObject

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def observe(correlator: Correlator, kind: str, obj: k.Obj, change: str = "ADDED") -> list[object]:
    return list(correlator.observe(Observation(kind, change, obj, NOW)))  # type: ignore[arg-type]


def test_pod_before_its_job_is_held_then_released_after_the_job() -> None:
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    job = k.mpijob()
    worker = k.pod(job, "worker", 1)
    scheduled = k.event(worker, "FailedScheduling", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")

    assert observe(correlator, "pod", worker) == []
    assert observe(correlator, "event", scheduled) == []
    assert correlator.held == 2
    released = observe(correlator, "job", job)

    assert [type(e) for e in released] == [JobObserved, PodObserved, K8sEventObserved]
    pod_event, k8s_event = released[1], released[2]
    assert isinstance(pod_event, PodObserved) and isinstance(k8s_event, K8sEventObserved)
    assert pod_event.job.uid == job["metadata"]["uid"] and (pod_event.role, pod_event.index) == ("worker", 1)
    assert k8s_event.job.uid == job["metadata"]["uid"] and k8s_event.involved.name == "pi-worker-1"
    assert correlator.held == 0


def test_unclaimed_objects_are_dropped_after_the_ttl() -> None:
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    orphan = k.pod(k.mpijob("gone"), "worker", 0)
    observe(correlator, "pod", orphan)
    clock.now = 29
    assert correlator.expire() == 0
    clock.now = 31
    assert correlator.expire() == 1
    assert (correlator.held, correlator.dropped) == (0, 1)


def test_foreign_pods_and_events_are_ignored_at_once() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    web = k.pod(k.mpijob(), "worker", 0)
    web["metadata"]["labels"] = {"app": "web"}
    deployment = {
        "kind": "Deployment",
        "apiVersion": "apps/v1",
        "metadata": {"name": "web", "namespace": "team-a", "uid": "d1"},
    }
    assert observe(correlator, "pod", web) == []
    assert observe(correlator, "event", k.event(deployment, "ScalingReplicaSet", "Scaled up")) == []
    assert correlator.held == 0


def test_a_recreated_job_name_gets_its_own_pods() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    first, second = k.mpijob(), k.mpijob()
    observe(correlator, "job", first)
    observe(correlator, "job", second)
    late_worker_of_first = k.pod(first, "worker", 0)  # owned by the first uid
    (event,) = observe(correlator, "pod", late_worker_of_first)
    assert isinstance(event, PodObserved) and event.job.uid == first["metadata"]["uid"]


@pytest.mark.parametrize(
    "breakage",
    [
        lambda o: o.pop("metadata"),
        lambda o: o["metadata"].pop("uid"),
        lambda o: o["metadata"].update(creationTimestamp="yesterday"),
    ],
    ids=["no-metadata", "no-uid", "bad-timestamp"],
)
def test_malformed_jobs_raise_a_clear_error(breakage: object) -> None:
    job = k.mpijob()
    breakage(job)  # type: ignore[operator]
    with pytest.raises(MalformedObject, match=r"metadata|timestamp"):
        observe(Correlator(30, ManualClock()), "job", job)


def test_event_about_a_pod_waits_for_the_pod_even_after_the_job_arrived() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    job = k.mpijob()
    worker = k.pod(job, "worker", 0)
    assert observe(correlator, "event", k.event(worker, "FailedScheduling", "0/3 nodes are available")) == []
    assert [type(e) for e in observe(correlator, "job", job)] == [JobObserved]
    assert [type(e) for e in observe(correlator, "pod", worker)] == [PodObserved, K8sEventObserved]
    assert correlator.held == 0
