"""After a restart, a pod of a job published before it that fails is published with its run at
once, not once the list of every job beside their resumed watch ended: the correlator starts
from the jobs the ``published`` bucket holds (issue 40). What the API server says wins over
that seed: a job deleted while no watcher ran, and its name reused by a new run, misplace no
pod. Real NATS, the simulated API server."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from nats.js import JetStreamContext

from controller.bus.streams import ensure_streams
from controller.contract.events import BusEvent, JobObserved, PodObserved
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.testing import objects as k
from controller.testing.simcluster import RecordedRequest, SimCluster
from controller.testing.waits import until
from tests.watchers.test_relist_publishes_deletions_made_while_down import published
from tests.watchers.test_relist_publishes_only_what_changed import watch_until_quiet, watchers_running

JOBS_LIST = "mpijobs?limit="
"""What the path of a list of MPIJobs (not their watch) has."""


def uid(obj: k.Obj) -> str:
    return str(obj["metadata"]["uid"])


def jobs_lists(requests: list[RecordedRequest]) -> int:
    """How many of ``requests`` list MPIJobs."""
    return sum(r.path.endswith("/mpijobs") and "watch" not in r.query for r in requests)


def pod_runs(events: list[BusEvent], pod: k.Obj) -> set[str]:
    """The runs the pod events of ``pod`` went to."""
    return {e.job.uid for e in events if isinstance(e, PodObserved) and e.uid == uid(pod)}


async def test_a_pod_that_fails_after_a_restart_does_not_wait_for_the_jobs_list(
    sim: SimCluster, settings: Settings, topology: Topology, js: JetStreamContext
) -> None:
    await ensure_streams(js, topology, settings.nats)
    job = sim.create(k.mpijob("big", workers=2))
    pods = [sim.create(k.pod(job, "worker", i, node=f"gpu-{i}")) for i in range(2)]
    await watch_until_quiet(settings, sim, js, topology, expected=3)

    sim.fail_next(1_000_000, 503, match=JOBS_LIST)  # the jobs' list beside their resumed watch never ends
    requests, refused = len(sim.requests), len(sim.refused)
    failed = k.oom_killed(pods[1])
    await watch_until_quiet(settings, sim, js, topology, expected=4, meanwhile=lambda: sim.update(failed))

    (event,) = (await published(js, topology))[3:]
    assert isinstance(event, PodObserved) and (event.uid, event.job.uid) == (uid(pods[1]), uid(job))
    assert event.containers[0].reason == "OOMKilled"
    listed = jobs_lists(sim.requests[requests:])
    assert listed >= 1 and jobs_lists(sim.refused[refused:]) == listed, "no list of the jobs answered"


async def run_until(
    settings: Settings,
    sim: SimCluster,
    topology: Topology,
    meanwhile: Callable[[], Awaitable[None]],
    condition: Callable[[], Awaitable[bool]],
) -> None:
    """Run the watchers: ``meanwhile`` once they started, then until ``condition`` holds."""
    async with watchers_running(settings, sim, topology):
        await meanwhile()
        await until(condition, 20, lambda: "the watchers never got there")
        await asyncio.sleep(0.5)  # and nothing more arrives


@pytest.mark.parametrize("compacted", [False, True], ids=["watch-resumed", "position-compacted"])
async def test_a_deleted_job_and_its_reused_name_misplace_no_pod(
    compacted: bool, sim: SimCluster, settings: Settings, topology: Topology, js: JetStreamContext
) -> None:
    """While no watcher ran ``reused`` was deleted and created again (a new uid), ``gone`` was
    deleted. After the restart the jobs answer late: the pods come first. The old run's pods go
    to the old run, the new run's pods (one failed) wait for the new run, and no pod goes to
    ``gone``'s run but its own."""
    await ensure_streams(js, topology, settings.nats)
    old, gone = sim.create(k.mpijob("reused", workers=1)), sim.create(k.mpijob("gone", workers=1))
    old_pod, gone_pod = sim.create(k.pod(old, "worker", 0)), sim.create(k.pod(gone, "worker", 0))
    await watch_until_quiet(settings, sim, js, topology, expected=4)
    before = len(await published(js, topology))

    for obj in (gone_pod, gone, old_pod, old):
        sim.delete(obj)
    new = sim.create(k.mpijob("reused", workers=1))
    new_pod = sim.create(k.pod(new, "worker", 0))
    sim.update(k.oom_killed(new_pod))
    if compacted:
        sim.compact()
    sim.fail_next(1_000_000, 503, match="mpijobs")  # neither their list nor their watch answers yet

    async def jobs_answer_late() -> None:
        await until(
            lambda: any(w.startswith("pods") for w in sim.open_watches()), 10, lambda: str(sim.open_watches())
        )
        await asyncio.sleep(1.5)  # the pods reach the correlator first
        events = (await published(js, topology))[before:]
        assert not any(isinstance(e, PodObserved) and e.uid == uid(new_pod) for e in events), events
        sim.clear_failures()

    async def all_told() -> bool:
        events = (await published(js, topology))[before:]
        jobs = {(e.uid, e.change) for e in events if isinstance(e, JobObserved)}
        failed = [e for e in events if isinstance(e, PodObserved) and e.phase == "Failed"]
        return (
            {(uid(gone), "DELETED"), (uid(old), "DELETED")} <= jobs
            and uid(new) in dict(jobs)
            and bool(failed)
        )

    await run_until(settings, sim, topology, jobs_answer_late, all_told)

    events = (await published(js, topology))[before:]
    assert pod_runs(events, new_pod) == {uid(new)}, "the new run's pod, to the new run only"
    assert pod_runs(events, old_pod) == {uid(old)}
    assert pod_runs(events, gone_pod) == {uid(gone)}
    (failed,) = [e for e in events if isinstance(e, PodObserved) and e.phase == "Failed"]
    assert (failed.uid, failed.job.uid) == (uid(new_pod), uid(new))
