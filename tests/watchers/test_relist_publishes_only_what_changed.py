"""A watcher restarted past JetStream's duplicate window republishes only the objects that changed
since it last published them: the last published version of each object survives the process in
a JetStream key-value bucket, not in memory."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from controller.bus.streams import connect, ensure_streams
from controller.bus.versions import BUCKET, POSITIONS
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.kube.resources import WATCHED
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.buckets import object_keys
from watchers.published import PublishedVersions
from watchers.service import run_watchers


async def jobs_stream_size(js: JetStreamContext, topology: Topology) -> int:
    return (await js.stream_info(topology.stream("jobs"))).state.messages


@contextlib.asynccontextmanager
async def watchers_running(
    settings: Settings, sim: SimCluster, topology: Topology
) -> AsyncIterator[PipelineMetrics]:
    """The watchers of ``sim`` running on their own NATS connection (as the watcher process has
    its own) while the block runs, then stopped: they end within 10 s and their connection drains."""
    assert settings.nats.url
    metrics, stop = PipelineMetrics(), asyncio.Event()
    nc = await connect(settings.nats.url, "tests-watchers")
    with KubeGateway.for_url(sim.url) as gateway:
        task = asyncio.create_task(run_watchers(settings, gateway, nc, topology, metrics, stop))
        try:
            yield metrics
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
            await nc.drain()


async def watch_until_quiet(
    settings: Settings,
    sim: SimCluster,
    js: JetStreamContext,
    topology: Topology,
    expected: int,
    meanwhile: Callable[[], object] = lambda: None,
    also: Callable[[], Awaitable[bool]] | None = None,
) -> PipelineMetrics:
    """Run the watchers until the JOBS stream holds ``expected`` messages (and ``also`` holds),
    then stop them; ``meanwhile`` changes the cluster once they watch."""
    async with watchers_running(settings, sim, topology) as metrics:
        await until(
            lambda: sum(sim.open_watches().values()) == len(WATCHED), 10, lambda: str(sim.open_watches())
        )
        meanwhile()

        async def settled() -> bool:
            return await jobs_stream_size(js, topology) >= expected

        await until(settled, 15, lambda: f"stream never reached {expected} messages")
        if also is not None:
            await until(also, 15, lambda: "the watchers never got there")
        await asyncio.sleep(0.5)  # and nothing more arrives
    return metrics


async def watched_cluster(
    settings: Settings, sim: SimCluster, js: JetStreamContext, topology: Topology, count: int
) -> tuple[list[k.Obj], list[k.Obj]]:
    """``count`` MPIJobs of three workers each, watched until every object was published once."""
    jobs = [k.mpijob(f"train-{n}", workers=3) for n in range(count)]
    pods = [k.pod(job, "worker", i, node=f"gpu-{i}") for job in jobs for i in range(3)]
    for obj in [*jobs, *pods]:
        sim.create(obj)
    await watch_until_quiet(settings, sim, js, topology, expected=len(jobs) + len(pods))
    return jobs, pods


async def test_a_restart_past_the_duplicate_window_republishes_only_changes(
    sim: SimCluster, settings: Settings, topology: Topology, js: JetStreamContext
) -> None:
    settings.nats.duplicate_window_s = 0.5  # past it, JetStream would store every relisted object again
    await ensure_streams(js, topology, settings.nats)
    jobs, pods = await watched_cluster(settings, sim, js, topology, 5)
    first = await jobs_stream_size(js, topology)
    assert first == len(jobs) + len(pods)

    await asyncio.sleep(1.0)  # the duplicate window is over
    sim.update(k.oom_killed(pods[0]))
    metrics = await watch_until_quiet(settings, sim, js, topology, expected=first + 1)

    assert await jobs_stream_size(js, topology) == first + 1, "only the changed pod was published again"
    skipped = metrics.sample("mpijc_skipped_objects_total", reason="unchanged")
    assert skipped == len(jobs) + len(pods) - 1


async def test_a_relist_reports_as_added_what_the_watch_published_as_modified(
    sim: SimCluster, settings: Settings, topology: Topology, js: JetStreamContext
) -> None:
    """A pod changed while watched was published as MODIFIED; after a restart the list reports it
    ADDED at the same resourceVersion: the same state, not news (it was published again)."""
    settings.nats.duplicate_window_s = 0.5
    await ensure_streams(js, topology, settings.nats)
    jobs, pods = await watched_cluster(settings, sim, js, topology, 2)
    failed = k.oom_killed(pods[0])
    first = len(jobs) + len(pods)
    await watch_until_quiet(settings, sim, js, topology, first + 1, lambda: sim.update(failed))

    await asyncio.sleep(1.0)  # the duplicate window is over
    metrics = await watch_until_quiet(settings, sim, js, topology, expected=first + 1)

    assert await jobs_stream_size(js, topology) == first + 1, "the relist published nothing again"
    assert metrics.sample("mpijc_skipped_objects_total", reason="unchanged") == first


async def test_deleted_objects_leave_the_bucket(
    sim: SimCluster, settings: Settings, topology: Topology, js: JetStreamContext, nats_client: NATS
) -> None:
    """The bucket holds the objects that exist: a week of deleted pods would otherwise grow it,
    every start's load and the watcher's memory."""
    await ensure_streams(js, topology, settings.nats)
    jobs, pods = await watched_cluster(settings, sim, js, topology, 4)
    assert len(await object_keys(js, topology.bucket(BUCKET), POSITIONS)) == len(jobs) + len(pods)

    gone = [*jobs[:3], *pods[:9]]  # three jobs and their nine pods
    left = {f"job.{jobs[3]['metadata']['uid']}"} | {f"pod.{p['metadata']['uid']}" for p in pods[9:]}

    async def only_what_exists() -> bool:  # neither values nor delete markers of the others
        return await object_keys(js, topology.bucket(BUCKET), POSITIONS) == left

    await watch_until_quiet(
        settings,
        sim,
        js,
        topology,
        len(jobs) + len(pods) + len(gone),
        lambda: [sim.delete(o) for o in gone],
        only_what_exists,
    )
    assert await PublishedVersions(nats_client, topology).load(settings.nats) == len(left)

    # what earlier versions left of deleted objects (their last version, a delete marker) goes at load
    kv = await js.key_value(topology.bucket(BUCKET))
    await kv.put("pod.deleted-long-ago", b"41:DELETED")
    await kv.put("pod.removed-long-ago", b"42:MODIFIED")
    await kv.delete("pod.removed-long-ago")
    assert await PublishedVersions(nats_client, topology).load(settings.nats) == len(left)
    await until(only_what_exists, 10, lambda: "the keys of deleted objects were never purged")


async def test_a_load_waits_for_no_purge_of_deleted_objects(
    settings: Settings, topology: Topology, js: JetStreamContext, nats_client: NATS
) -> None:
    """The keys of objects deleted while no watcher ran are purged beside the load, not before it
    ends: one purge request each, thousands of them held a restart's first publish back."""
    await ensure_streams(js, topology, settings.nats)
    versions = PublishedVersions(nats_client, topology)
    await versions.load(settings.nats)  # the bucket created
    kv = await js.key_value(topology.bucket(BUCKET))
    await kv.put("pod.kept", b"7:MODIFIED")
    for i in range(20):
        await kv.put(f"pod.deleted-{i}", b"40:DELETED")
    release, purging = asyncio.Event(), asyncio.Event()
    purge = versions._bucket.forget

    async def slow_purge(keys: list[str]) -> None:  # a server slow to answer each purge
        purging.set()
        await release.wait()
        await purge(keys)

    versions._bucket.forget = slow_purge  # type: ignore[method-assign]
    assert await asyncio.wait_for(versions.load(settings.nats), 10) == 1
    await asyncio.wait_for(purging.wait(), 10)  # the purge was asked for, and the load did not wait
    assert len(await object_keys(js, topology.bucket(BUCKET), POSITIONS)) == 21
    release.set()

    async def purged() -> bool:
        return await object_keys(js, topology.bucket(BUCKET), POSITIONS) == {"pod.kept"}

    await until(purged, 10, lambda: "the keys of deleted objects were never purged")
