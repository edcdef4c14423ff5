"""The simulated API server speaks the API server's protocol, as seen through the real client.

What the watchers rely on is pinned here: list versions and selectors, watch replay and
bookmarks, the 410 Expired Status, optimistic concurrency on Leases, pods/log tails.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest

from controller.contract.selectors import SelectorError, parse_selector
from controller.kube.errors import (
    APIConflictError,
    APIError,
    APIGoneError,
    APINotFoundError,
    APIUnavailableError,
)
from controller.kube.gateway import KubeGateway
from controller.kube.resources import EVENTS, LEASES, MPI_PODS, MPIJOBS, PODS, Lease, RawWatchEvent
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster

LABELS = {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/job-role": "worker"}


@pytest.mark.parametrize(
    ("selector", "matches"),
    [
        ("", True),
        ("training.kubeflow.org/job-name", True),
        ("jobset.sigs.k8s.io/jobset-name", False),
        ("!jobset.sigs.k8s.io/jobset-name", True),
        ("training.kubeflow.org/job-role=worker", True),
        ("training.kubeflow.org/job-role==launcher", False),
        ("training.kubeflow.org/job-role!=launcher", True),
        ("training.kubeflow.org/job-role in (launcher, worker)", True),
        ("training.kubeflow.org/job-role notin (worker)", False),
        ("training.kubeflow.org/job-name,training.kubeflow.org/job-role=worker", True),
        ("training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=launcher", False),
    ],
    ids=[
        "empty",
        "exists",
        "absent",
        "not-exists",
        "equals",
        "double-equals",
        "not-equals",
        "in",
        "notin",
        "and-both",
        "and-one-fails",
    ],
)
def test_label_selectors(selector: str, matches: bool) -> None:
    assert parse_selector(selector).matches(LABELS) is matches


def test_an_unparseable_label_selector_is_refused() -> None:
    with pytest.raises(SelectorError, match="not a valid label value"):
        parse_selector("a=b=c")


def raw_json(gateway: KubeGateway, path: str, **query: str) -> Any:
    return json.loads(gateway.request("GET", path, query=list(query.items())).data)


def test_lists_by_namespace_and_selector_at_the_current_version(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    job_a = sim.create(k.mpijob("pi", namespace="team-a"))
    job_b = sim.create(k.mpijob("pi", namespace="team-b"))
    for job in (job_a, job_b):
        sim.create(k.pod(job, "launcher"))
    sim.create(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "team-a"}, "spec": {}}
    )

    everywhere, version = gateway.list(MPI_PODS, None)
    team_a, _ = gateway.list(MPI_PODS, "team-a")
    all_pods, _ = gateway.list(PODS, "team-a")

    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in everywhere] == [
        ("team-a", "pi-launcher-x7k2p"),
        ("team-b", "pi-launcher-x7k2p"),
    ]
    assert [p["metadata"]["name"] for p in team_a] == ["pi-launcher-x7k2p"]
    assert sorted(p["metadata"]["name"] for p in all_pods) == ["pi-launcher-x7k2p", "web"]
    assert version == str(sim.resource_version) == "5"


def test_built_in_list_items_omit_kind_on_the_wire_and_the_gateway_restores_it(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    job = sim.create(k.mpijob("pi"))
    sim.create(k.pod(job, "launcher"))

    pods = raw_json(gateway, "/api/v1/pods")
    jobs = raw_json(gateway, "/apis/kubeflow.org/v2beta1/mpijobs")

    assert (pods["apiVersion"], pods["kind"]) == ("v1", "PodList")
    assert "kind" not in pods["items"][0] and "apiVersion" not in pods["items"][0]
    assert (jobs["items"][0]["apiVersion"], jobs["items"][0]["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    listed, _ = gateway.list(PODS, None)
    assert (listed[0]["apiVersion"], listed[0]["kind"]) == ("v1", "Pod")


def test_stored_objects_get_uid_version_and_creation_time(sim: SimCluster) -> None:
    job = k.mpijob("pi")
    del job["metadata"]["uid"], job["metadata"]["creationTimestamp"]
    stored = sim.create(job)
    assert stored["metadata"]["uid"] and stored["metadata"]["creationTimestamp"].endswith("Z")
    assert stored["metadata"]["resourceVersion"] == "1"
    assert sim.update(stored)["metadata"]["resourceVersion"] == "2"
    assert sim.delete(stored)["metadata"]["resourceVersion"] == "3"
    assert sim.get(stored) is None


def collect(stream: Any, count: int | None = None, *, bookmarks: bool = False) -> list[RawWatchEvent]:
    """Events of a watch stream until it ends, or until ``count`` of them came (then it is closed)."""
    events: list[RawWatchEvent] = []
    for event in stream:
        if event["type"] == "BOOKMARK" and not bookmarks:
            continue
        events.append(event)
        if count is not None and len(events) == count:
            stream.close()
    return events


def test_a_watch_replays_history_after_its_version_then_follows_live_changes(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    job = sim.create(k.mpijob("pi"))
    since = sim.resource_version
    launcher = sim.create(k.pod(job, "launcher"))
    sim.update(k.with_container_state(launcher, {"running": {}}, phase="Running"))
    threading.Timer(0.2, lambda: sim.delete(launcher)).start()

    events = collect(gateway.watch(MPI_PODS, None, str(since), timeout_s=5), count=3)

    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [
        ("ADDED", "2"),
        ("MODIFIED", "3"),
        ("DELETED", "4"),
    ]
    assert events[1]["object"]["status"]["phase"] == "Running"


def test_a_watch_without_version_starts_with_the_current_state(sim: SimCluster, gateway: KubeGateway) -> None:
    job = sim.create(k.mpijob("pi"))
    sim.update(k.with_conditions(job, ("Created", "MPIJobCreated", "2026-11-20T10:00:01Z")))
    events = collect(gateway.watch(MPIJOBS, None, "", timeout_s=5), count=1)
    assert [(e["type"], e["object"]["metadata"]["resourceVersion"]) for e in events] == [("ADDED", "2")]


def test_an_object_leaving_or_entering_the_selector_is_deleted_or_added(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    job = sim.create(k.mpijob("pi"))
    pod = sim.create(k.pod(job, "launcher"))
    since = sim.resource_version
    orphan = {**pod, "metadata": {**pod["metadata"], "labels": {}}}
    sim.update(orphan)
    sim.update(pod)
    events = collect(gateway.watch(MPI_PODS, None, str(since), timeout_s=5), count=2)
    assert [e["type"] for e in events] == ["DELETED", "ADDED"]


def test_a_watch_ends_after_its_timeout_with_bookmarks_only_when_allowed(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    started = time.monotonic()
    with_bookmarks = collect(gateway.watch(MPIJOBS, None, "0", timeout_s=1), bookmarks=True)
    assert 0.9 < time.monotonic() - started < 2.0
    assert {e["type"] for e in with_bookmarks} == {"BOOKMARK"} and len(with_bookmarks) >= 5
    assert with_bookmarks[0]["object"] == {
        "kind": "MPIJob",
        "apiVersion": "kubeflow.org/v2beta1",
        "metadata": {"resourceVersion": "0"},
    }

    response = gateway.request(
        "GET", "/apis/kubeflow.org/v2beta1/mpijobs", query=[("watch", "true"), ("timeoutSeconds", "1")]
    )
    assert response.data == b"", "no bookmarks unless allowWatchBookmarks=true"


def test_a_watch_from_a_compacted_version_gets_the_410_expired_status(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    for n in range(3):
        sim.create(k.mpijob(f"job-{n}"))
    sim.compact(2)

    response = gateway.request("GET", MPIJOBS.path(), query=[("watch", "true"), ("resourceVersion", "1")])
    assert response.status == 200, "the watch cache answers in the stream, not with the HTTP status"
    [line] = response.data.splitlines()
    assert json.loads(line) == {
        "type": "ERROR",
        "object": {
            "apiVersion": "v1",
            "kind": "Status",
            "status": "Failure",
            "message": "too old resource version: 1 (2)",
            "reason": "Expired",
            "code": 410,
        },
    }
    with pytest.raises(APIGoneError, match="too old resource version"):
        collect(gateway.watch(MPIJOBS, None, "1", timeout_s=5))
    assert [
        e["object"]["metadata"]["name"] for e in collect(gateway.watch(MPIJOBS, None, "2", timeout_s=5), 1)
    ] == ["job-2"]


def test_leases_are_guarded_by_their_resource_version(sim: SimCluster, gateway: KubeGateway) -> None:
    body: Lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "watchers", "namespace": "mpijc"},
        "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15},
    }
    created = gateway.create_lease("mpijc", body)
    with pytest.raises(APIConflictError, match="already exists") as exists:
        gateway.create_lease("mpijc", body)
    assert exists.value.reason == "AlreadyExists"

    renewed = gateway.replace_lease("mpijc", "watchers", {**created, "spec": {"holderIdentity": "a"}})
    assert int(renewed["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    with pytest.raises(APIConflictError, match="the object has been modified") as stale:
        gateway.replace_lease("mpijc", "watchers", {**created, "spec": {"holderIdentity": "b"}})
    assert stale.value.reason == "Conflict"
    assert gateway.get_lease("mpijc", "watchers")["spec"]["holderIdentity"] == "a"
    assert gateway.get(LEASES, "mpijc", "watchers")["metadata"]["uid"] == created["metadata"]["uid"]


def test_events_can_be_created_with_a_generated_name(sim: SimCluster, gateway: KubeGateway) -> None:
    job = sim.create(k.mpijob("pi"))
    note = k.event(job, "OOMDetected", "Worker 2 failed: out of memory (limit 16Gi).")
    note["metadata"] = {"generateName": "pi.", "namespace": "team-a"}
    created = gateway.create_event("team-a", note)
    assert created["metadata"]["name"].startswith("pi.") and len(created["metadata"]["name"]) > 3
    [listed], _ = gateway.list(EVENTS, "team-a")
    assert listed["reason"] == "OOMDetected"


def test_pod_logs_honour_tail_lines_then_limit_bytes(sim: SimCluster, gateway: KubeGateway) -> None:
    job = sim.create(k.mpijob("pi"))
    sim.create(k.pod(job, "worker", 2))
    sim.set_log(
        "team-a", "pi-worker-2", "worker", "".join(f"step {n} loss 2.3\n" for n in range(100)) + "Killed\n"
    )

    assert gateway.read_log_tail("team-a", "pi-worker-2", "worker", 2, 16384) == [
        "step 99 loss 2.3",
        "Killed",
    ]
    assert gateway.read_log_tail("team-a", "pi-worker-2", "worker", 2, 10) == ["step 99 lo"]
    with pytest.raises(APIError) as invalid:
        gateway.read_log_tail("team-a", "pi-worker-2", "sidecar", 2, 100)
    assert invalid.value.status == 400


def test_injected_failures_answer_with_a_status_and_then_stop(sim: SimCluster, gateway: KubeGateway) -> None:
    sim.fail_next(1, 503, match="/leases/")
    gateway.list(MPIJOBS, None)  # not matched: served
    with pytest.raises(APIUnavailableError, match="injected failure 503") as failed:
        gateway.get_lease("mpijc", "watchers")
    assert failed.value.body == {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": "injected failure 503",
        "reason": "ServiceUnavailable",
        "code": 503,
    }
    assert gateway.list(MPIJOBS, None) == ([], "0")


def test_injected_failures_answer_their_count_in_the_order_queued(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    """A count is kept as one entry: a failure queued for ever (a test's "never answers") costs a
    request it does not match nothing, and each queue answers exactly its count."""
    sim.fail_next(10**12, 503, match="/leases/")  # for ever: one entry, not a list of that length
    sim.fail_next(2, 500, match="mpijobs")
    for _ in range(3):
        with pytest.raises(APIUnavailableError):
            gateway.get_lease("mpijc", "watchers")
    with pytest.raises(APIError) as first:
        gateway.list(MPIJOBS, None)
    with pytest.raises(APIError) as second:
        gateway.list(MPIJOBS, None)
    assert first.value.status == second.value.status == 500
    assert gateway.list(MPIJOBS, None) == ([], "0")  # the count of two spent
    sim.clear_failures()
    with pytest.raises(APINotFoundError):  # answered again: there is no such lease
        gateway.get_lease("mpijc", "watchers")


@pytest.mark.parametrize(
    ("abrupt", "error"), [(False, None), (True, APIUnavailableError)], ids=["clean", "cut"]
)
def test_dropped_watches_end_cleanly_or_break(
    sim: SimCluster, gateway: KubeGateway, abrupt: bool, error: type[Exception] | None
) -> None:
    stream = gateway.watch(MPIJOBS, None, "0", timeout_s=30)
    threading.Timer(0.2, lambda: sim.drop_watches(abrupt=abrupt)).start()
    if error is None:
        assert collect(stream) == []
    else:
        with pytest.raises(error):
            collect(stream)
    deadline = time.monotonic() + 2
    while sim.open_watches() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sim.open_watches() == {}


def test_history_past_its_limit_is_compacted_like_etcd() -> None:
    with SimCluster(history_limit=10) as small, KubeGateway.for_url(small.url) as kube:
        for n in range(12):
            small.create(k.mpijob(f"job-{n}"))
        with pytest.raises(APIGoneError):
            next(kube.watch(MPIJOBS, None, "1", timeout_s=5))
        recent = collect(kube.watch(MPIJOBS, None, "10", timeout_s=5), count=2)
        assert [e["object"]["metadata"]["name"] for e in recent] == ["job-10", "job-11"]


def test_a_live_watch_is_not_expired_by_compacting_what_it_has_already_seen(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    job = sim.create(k.mpijob("pi"))

    def busy_elsewhere_then_compact_then_change() -> None:
        deadline = time.monotonic() + 30  # once the watch stands (its starting point is taken then)
        while not sim.open_watches() and time.monotonic() < deadline:
            time.sleep(0.01)
        for n in range(3):
            sim.create(k.pod(job, "worker", n))
        sim.compact()
        sim.create(k.mpijob("second"))

    threading.Thread(target=busy_elsewhere_then_compact_then_change, daemon=True).start()
    events = collect(gateway.watch(MPIJOBS, None, str(sim.resource_version), timeout_s=5), count=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "second")]
