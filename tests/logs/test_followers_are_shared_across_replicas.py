"""The watcher replicas share the log follows: each running container is followed by exactly one
replica, both replicas follow some, and a replica that dies (no hand-over: its leases expire) or
stops (its leases handed back) has its containers taken over by the other, which resumes them
from the bus with no gap and no duplicate line; a replica starting later learns the running pods
from the bus and gets its share. The leading watcher only publishes; the followers learn the pods from what it
published. And two followers of one container, as while a lease changes hands, never store a
line twice. Real client → simulated API server → real NATS."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.errors import KeyDeletedError, KeyNotFoundError

from controller.bus.logstore import SupersededError, parsed_batches, publish_after, read_raw, stored_end
from controller.bus.streams import connect
from controller.contract.logs import LogBatch, LogLine, LogPosition
from controller.contract.settings import LogSettings, Settings
from controller.contract.subjects import Topology
from controller.kube.gateway import KubeGateway
from controller.metrics import PipelineMetrics
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.log_fixtures import Logged, Run, running_run, stored_texts
from tests.pipeline_fixtures import watchers_running
from watchers.following import FollowKey, LogFollower
from watchers.sharing import LEASE_BUCKET, SharedFollower

T = 1_795_000_000 * 10**9
S = 10**9


@dataclass
class Replica:
    """A watcher replica's share of the follows, running."""

    shared: SharedFollower
    stop: asyncio.Event
    task: asyncio.Task[None]

    @property
    def follower(self) -> LogFollower:
        return self.shared.follower


@contextlib.asynccontextmanager
async def replica(
    settings: Settings, sim: SimCluster, topology: Topology, name: str
) -> AsyncIterator[Replica]:
    """A watcher replica's share of the follows, on a connection and a gateway of its own, running
    while inside (killed on the way out, unless stopped before: its leases are not handed back)."""
    assert settings.nats.url
    nc = await connect(settings.nats.url, f"tests-{name}")
    with KubeGateway.for_url(sim.url, connections=settings.logs.max_follows) as gateway:
        shared = SharedFollower(settings, gateway, nc, topology, replica=name)
        stop = asyncio.Event()
        task = asyncio.create_task(shared.run(stop), name=name)
        try:
            yield Replica(shared, stop, task)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await nc.close()


def runs_in_both_partitions(sim: SimCluster, topology: Topology, partitions: int) -> list[Run]:
    """Two runs in each of partitions 0 and 1 (names picked by their hash), each a launcher and a
    worker running."""
    names: dict[int, list[str]] = {0: [], 1: []}
    for i in range(100):
        name = f"train-{i}"
        partition = topology.partition_of("team-a", name, partitions)
        if len(names[partition]) < 2:
            names[partition].append(name)
    return [running_run(sim, name, workers=1) for name in names[0] + names[1]]


def containers(runs: list[Run]) -> list[tuple[str, str, str]]:
    return [run.pod(index) for run in runs for index in (0, 1)]


@pytest.mark.parametrize("ends", ["killed", "stopped"])
async def test_replicas_share_the_follows_and_take_over_a_lost_one_without_gap_or_duplicate(
    sim: SimCluster,
    nats_client: NATS,
    js: JetStreamContext,
    topology: Topology,
    settings: Settings,
    ends: str,
) -> None:
    logs = LogSettings(partitions=2, lease_ttl_s=1.5, retry_s=0.05)
    shared = settings.model_copy(update={"logs": logs})
    leader = settings.model_copy(update={"logs": logs.model_copy(update={"follow": False})})
    runs = runs_in_both_partitions(sim, topology, logs.partitions)
    for index, (namespace, pod, container) in enumerate(containers(runs)):
        sim.set_log(namespace, pod, container, f"{pod} line 0\n", at_ns=T + index)
    pod_uids = {run.pod(i)[1]: run.pods[i]["metadata"]["uid"] for run in runs for i in (0, 1)}
    everything = {(pod_uids[pod], container) for _, pod, container in containers(runs)}

    async def all_stored(lines: int) -> bool:
        counts = [len(await stored_texts(nats_client, topology, run.job)) for run in runs]
        return all(count >= 2 * lines for count in counts)

    async with (
        watchers_running(leader, sim, js, topology, PipelineMetrics()),
        replica(shared, sim, topology, "b") as b,
    ):
        async with replica(shared, sim, topology, "a") as a:

            def split() -> tuple[frozenset[FollowKey], frozenset[FollowKey]]:
                return a.follower.following, b.follower.following

            await until(
                lambda: bool(a.follower.held and b.follower.held) and split()[0] | split()[1] == everything,
                15.0,
                split,
            )
            assert a.follower.following and b.follower.following
            assert a.follower.following.isdisjoint(b.follower.following)
            assert a.follower.held.isdisjoint(b.follower.held)
            await until(lambda: all_stored(1), 10.0)
            if ends == "stopped":  # a rolling update: its follows end, then its leases are handed back
                held = a.follower.held
                a.stop.set()
                await a.task
                assert not a.follower.following and not a.follower.held
                leases = await js.key_value(topology.bucket(LEASE_BUCKET))
                for partition in held:
                    with contextlib.suppress(KeyNotFoundError, KeyDeletedError):
                        assert (await leases.get(f"lease.p{partition}")).value == b"b"  # taken already
        # killed, replica a's leases expire; stopped, they were handed back
        for index, (namespace, pod, container) in enumerate(containers(runs)):
            sim.append_log(namespace, pod, container, f"{pod} line 1\n", at_ns=T + S + index)
        await until(lambda: b.follower.following == everything, 15.0, lambda: b.follower.following)
        assert b.follower.held == {0, 1}
        for index, (namespace, pod, container) in enumerate(containers(runs)):
            sim.append_log(namespace, pod, container, f"{pod} line 2\n", at_ns=T + 2 * S + index)
        await until(lambda: all_stored(3), 15.0)
        # a replica starting now learns the pods from the bucket (nothing about them changes now)
        async with replica(shared, sim, topology, "c") as c:
            await until(
                lambda: (
                    bool(c.follower.following) and c.follower.following | b.follower.following == everything
                ),
                15.0,
                lambda: (c.follower.following, b.follower.following),
            )
            assert c.follower.following.isdisjoint(b.follower.following)
            for index, (namespace, pod, container) in enumerate(containers(runs)):
                sim.append_log(namespace, pod, container, f"{pod} line 3\n", at_ns=T + 3 * S + index)
            await until(lambda: all_stored(4), 15.0)
    for run in runs:
        for index in (0, 1):
            pod = run.pod(index)[1]
            assert await stored_texts(nats_client, topology, run.job, pod) == [
                f"{pod} line {i}" for i in range(4)
            ]


async def test_two_followers_of_one_container_store_each_line_once(logged: Logged) -> None:
    run = logged.run("overlap")
    namespace, pod, container = run.pod(0)
    logged.sim.set_log(namespace, pod, container, "".join(f"step {i}\n" for i in range(3)), at_ns=T)
    logs = LogSettings(retry_s=0.05)
    async with (
        logged.following(logs) as first,
        logged.following(logs) as second,
    ):
        first.add(run)
        second.add(run)  # both follow the launcher, as a replica past its lease and its successor would
        for i in range(3, 30):
            logged.sim.append_log(namespace, pod, container, f"step {i}\n", at_ns=T + i * S // 10)
            await asyncio.sleep(0.01)  # lines written while both follow, over several batches

        has = logged.has(run.job, pod)
        await until(lambda: has(30), 15.0)
    assert await logged.texts(run.job, pod) == [f"step {i}" for i in range(30)]


async def test_a_batch_is_stored_only_right_after_the_last_one_its_follower_knows(
    js: JetStreamContext, topology: Topology, settings: Settings
) -> None:
    retry_s = settings.nats.publish_retry_s

    def batch(ts: int, text: str) -> LogBatch:
        position = LogPosition(ts=ts, ties=1, stored_bytes=ts)
        line = LogLine(ts=ts, text=text)
        return LogBatch(
            run_uid="u", namespace="team-a", job="j", pod="p", container="c", lines=(line,), position=position
        )

    first = await publish_after(js, topology, [batch(1, "a"), batch(2, "b")], 0, retry_s)
    assert (
        await publish_after(js, topology, [batch(2, "b")], first - 1, retry_s) == first
    )  # a lost ack, again
    with pytest.raises(SupersededError):  # another follower, resuming where it stood before "b"
        await publish_after(js, topology, [batch(3, "b c")], first - 1, retry_s)
    with pytest.raises(SupersededError):  # one that never saw anything stored
        await publish_after(js, topology, [batch(3, "c")], 0, retry_s)
    assert await publish_after(js, topology, [batch(3, "c")], first, retry_s) > first
    end = await stored_end(js, topology, "team-a", "j", "u", "p", "c")
    assert end.position.ts == 3
    assert [
        s.batch.lines[0].text
        async for s in parsed_batches(read_raw(js, topology, topology.run_logs("team-a", "j", "u")))
        if s
    ] == [
        "a",
        "b",
        "c",
    ]
