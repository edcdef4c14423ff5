"""BOOKMARK events move the loop's resourceVersion forward and never reach the sink.

Why it matters: a quiet resource (few MPIJobs) on a busy cluster (many pod changes) would
otherwise resume from the version of its last own change, long compacted away, and relist
after every watch timeout. With bookmarks it resumes from a recent version.
"""

from __future__ import annotations

from controller.contract.settings import WatcherSettings
from controller.kube.gateway import KubeGateway
from controller.kube.resources import MPIJOBS
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.kube_fixtures import list_requests, watch_requests, watching


async def test_a_quiet_resource_resumes_from_the_bookmarked_version_and_survives_compaction(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    settings = WatcherSettings(watch_timeout_s=1, backoff_initial_s=0.02, backoff_max_s=0.1)
    job = sim.create(k.mpijob("pi", workers=2))
    async with watching(gateway, MPIJOBS, settings) as watch:
        await watch.recorder.wait_for_count(1)
        listed_at = sim.resource_version
        for obj in [k.pod(job, "launcher")] + [k.pod(job, "worker", i) for i in range(2)]:
            sim.create(obj)  # busy elsewhere: the global resourceVersion moves on
        busy_until = sim.resource_version
        await until(lambda: watch.sample("mpijc_watch_bookmarks_total") >= 1)
        await until(lambda: len(watch_requests(sim, "mpijobs")) >= 2, timeout_s=5)  # the 1 s watch ended
        sim.compact()  # everything up to now is forgotten
        sim.update(k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-20T10:00:21Z")))
        await watch.recorder.wait_for_count(2)

    resumed = watch_requests(sim, "mpijobs")[1]
    assert int(resumed.query["resourceVersion"]) == busy_until > listed_at
    assert len(list_requests(sim, "mpijobs")) == 1, "no relist: the bookmarked version was still valid"
    assert watch.recorder.seen() == [("ADDED", "pi"), ("MODIFIED", "pi")]
    assert {c.type for c in watch.recorder.changes} <= {"ADDED", "MODIFIED", "DELETED"}
    assert watch.sample("mpijc_watch_relists_total") == 0
