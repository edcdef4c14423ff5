"""After a restart the correlator starts from the jobs published before it: a pod of one is placed
at once, before any list of the jobs ended; what the watches say wins over the seed (issue 40)."""

from __future__ import annotations

from datetime import UTC, datetime

from controller.contract.events import JobRef, PodObserved
from controller.testing import objects as k
from tests.clocks import ManualClock
from watchers.correlating import Correlator, Observation

NOW = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def observe(correlator: Correlator, kind: str, obj: k.Obj, change: str = "ADDED") -> list[object]:
    return list(correlator.observe(Observation(kind, change, obj, NOW)))  # type: ignore[arg-type]


def ref(job: k.Obj) -> JobRef:
    meta = job["metadata"]
    return JobRef(uid=meta["uid"], kind="MPIJob", namespace=meta["namespace"], name=meta["name"])


def runs(events: list[object]) -> list[str]:
    """The run uid of each pod event."""
    return [e.job.uid for e in events if isinstance(e, PodObserved)]


def test_a_pod_of_a_seeded_job_is_placed_at_once() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    job = k.mpijob("big", workers=2)
    assert correlator.seed([ref(job)]) == []
    failed = k.oom_killed(k.pod(job, "worker", 1))
    assert runs(observe(correlator, "pod", failed)) == [job["metadata"]["uid"]]
    assert correlator.held == 0


def test_seeding_releases_what_waited_for_the_job() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    job = k.mpijob("big", workers=2)
    assert observe(correlator, "pod", k.pod(job, "worker", 0)) == []
    assert runs(correlator.seed([ref(job)])) == [job["metadata"]["uid"]]


def test_an_observed_job_is_not_replaced_by_the_seed() -> None:
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    old, new = k.mpijob("reused"), k.mpijob("reused")
    observe(correlator, "job", new)
    correlator.seed([ref(old)])
    assert correlator.jobs[("team-a", "MPIJob", "reused")].uid == new["metadata"]["uid"]


def test_a_reused_name_places_each_pod_by_its_owner_uid() -> None:
    """Seeded ``reused`` is the old run; a pod of the new run with that name (its ownerReference
    says so) waits for the new run instead of going to the old one, whichever comes first."""
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    old, new = k.mpijob("reused"), k.mpijob("reused")
    correlator.seed([ref(old)])
    new_worker, old_worker = k.pod(new, "worker", 0), k.pod(old, "worker", 0)

    assert observe(correlator, "pod", new_worker) == [], "held: its owner is not the seeded uid"
    assert runs(observe(correlator, "pod", old_worker, "DELETED")) == [old["metadata"]["uid"]]
    assert runs(observe(correlator, "job", new)) == [new["metadata"]["uid"]]
    assert correlator.held == 0


def test_a_pod_without_owner_reference_goes_by_name() -> None:
    """A pod another object owns (a launcher its batch Job owns) has no uid to go by: its name."""
    correlator = Correlator(pending_ttl_s=30, clock=ManualClock())
    job = k.mpijob("big")
    correlator.seed([ref(job)])
    launcher = k.pod(job, "launcher")
    launcher["metadata"]["ownerReferences"] = [{"kind": "Job", "name": "big-launcher", "uid": "batch-1"}]
    assert runs(observe(correlator, "pod", launcher)) == [job["metadata"]["uid"]]


def test_a_seeded_job_the_list_did_not_bring_is_forgotten_after_the_grace_period() -> None:
    """Deleted while no watcher ran: once the first list of its kind was handed on, a seeded job
    not observed within the grace period leaves the index, as a deleted job does; one observed
    stays."""
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    gone, kept, elsewhere = k.mpijob("gone"), k.mpijob("kept"), k.mpijob("other", namespace="team-b")
    correlator.seed([ref(gone), ref(kept), ref(elsewhere)])
    correlator.settle(["MPIJob"], "team-a")
    observe(correlator, "job", kept)  # the list's, handed on before it ended, correlated after
    clock.now = 29
    correlator.expire()
    assert runs(observe(correlator, "pod", k.pod(gone, "worker", 0))) == [gone["metadata"]["uid"]]
    clock.now = 31
    correlator.expire()

    assert gone["metadata"]["uid"] not in correlator.jobs_by_uid
    assert ("team-a", "MPIJob", "gone") not in correlator.jobs
    assert observe(correlator, "pod", k.pod(gone, "worker", 1)) == [], "no run for it any more"
    assert runs(observe(correlator, "pod", k.pod(kept, "worker", 0))) == [kept["metadata"]["uid"]]
    assert elsewhere["metadata"]["uid"] in correlator.jobs_by_uid, "its namespace is not listed yet"


def test_a_seed_after_its_list_ended_is_forgotten_unless_observed() -> None:
    """The versions loaded after the jobs' list ended (their load was slow): seeded all the same,
    for the grace period, as the list's own jobs are on their way to the correlator."""
    clock = ManualClock()
    correlator = Correlator(pending_ttl_s=30, clock=clock)
    gone, kept = k.mpijob("gone"), k.mpijob("kept")
    correlator.settle(["MPIJob"], None)
    correlator.seed([ref(gone), ref(kept)])
    observe(correlator, "job", kept)
    clock.now = 31
    correlator.expire()
    assert set(correlator.jobs_by_uid) == {kept["metadata"]["uid"]}
