"""The notify consumer announces transitions only: a repeated, relisted or late observation (or a
finding update that does not change its status) announces nothing."""

from __future__ import annotations

from typing import Any

from consumers.notify.consumer import finding_occurrence, job_occurrences
from controller.contract.events import JobObserved
from controller.contract.notifications import JobInfo
from controller.store.models import NotifyFinding, NotifyJob
from controller.testing.notify import finding, job


def replay(*events: JobObserved) -> list[list[str]]:
    """Event types announced per observation, feeding the stored state forward."""
    state: NotifyJob | None = None
    out: list[list[str]] = []
    for event in events:
        found, row = job_occurrences(state, event)
        out.append([o.type for o in found])
        if row is not None:
            state = NotifyJob(**row)
    return out


def test_a_job_story_announces_each_transition_once() -> None:
    assert replay(
        job("Pending", change="ADDED", resource_version="10"),
        job("Pending", resource_version="11"),
        job("Running", resource_version="12"),
        job("Running", resource_version="12"),  # a relist
        job("Pending", resource_version="9"),  # late and older
        job("Failed", resource_version="13"),
        job("Failed", change="DELETED", resource_version="14"),
        job("Failed", resource_version="15"),  # after deletion: nothing
    ) == [["job.created"], [], ["job.running"], [], [], ["job.failed"], ["job.deleted"], []]


def test_a_deletion_at_the_last_version_is_announced_once() -> None:
    """A watcher back from a restart tells a deletion it missed at the version last published."""
    assert replay(
        job("Running", change="ADDED", resource_version="10"),
        job("Running", change="DELETED", resource_version="10"),
        job("Running", change="DELETED", resource_version="10"),
    ) == [["job.created", "job.running"], ["job.deleted"], []]


def test_a_job_first_seen_running_is_created_and_running() -> None:
    assert replay(job("Running", change="ADDED"), job("Succeeded")) == [
        ["job.created", "job.running"],
        ["job.succeeded"],
    ]


def test_a_job_first_seen_deleted_is_only_deleted() -> None:
    assert replay(job("Succeeded", change="DELETED")) == [["job.deleted"]]


def test_the_event_key_is_the_observation_so_redelivery_is_idempotent() -> None:
    first, _ = job_occurrences(None, job("Running", change="ADDED", resource_version="42"))
    again, _ = job_occurrences(None, job("Running", change="ADDED", resource_version="42"))
    assert (
        [o.key for o in first]
        == [o.key for o in again]
        == [
            "job.created:uid-team-a-pi:42",
            "job.running:uid-team-a-pi:42",
        ]
    )


def test_findings_announce_firing_and_resolved_not_updates() -> None:
    of = job("Failed")
    info = JobInfo(uid=of.uid, kind=of.kind, namespace=of.namespace, name=of.name)
    state: NotifyFinding | None = None
    announced: list[Any] = []
    for status, revision in [
        ("firing", 1),
        ("firing", 2),  # updated while firing
        ("firing", 1),  # late
        ("resolved", 3),
        ("firing", 4),  # a new episode
    ]:
        found, row = finding_occurrence(state, finding(of, status=status, revision=revision), info)
        announced.append(found.type if found else None)
        if row is not None:
            state = NotifyFinding(**row)
    assert announced == ["finding.firing", None, None, "finding.resolved", "finding.firing"]


def test_a_finding_first_seen_resolved_is_not_announced() -> None:
    of = job("Failed")
    info = JobInfo(uid=of.uid, kind=of.kind, namespace=of.namespace, name=of.name)
    found, row = finding_occurrence(None, finding(of, status="resolved"), info)
    assert found is None and row == {"id": finding(of).id, "status": "resolved", "revision": 1}


def test_an_end_that_implies_a_missed_start_announces_the_start_first() -> None:
    assert replay(
        job("Pending", change="ADDED", resource_version="10"),
        job("Succeeded", resource_version="12"),  # it ran: the job has a start time
        job("Running", resource_version="11"),  # the Running observation, late
    ) == [["job.created"], ["job.running", "job.succeeded"], []]


def test_a_job_that_failed_without_starting_is_never_announced_running() -> None:
    assert replay(job("Pending", change="ADDED"), job("Failed")) == [["job.created"], ["job.failed"]]
