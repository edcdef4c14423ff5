"""Of several replicas, one leads; a follower takes over when the leader stops renewing or steps aside.

Two electors share the simulated API server's Lease and one fake clock: lease durations pass
when the test advances the clock, so nothing sleeps through them; only the short renew
period is real time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from controller.contract.settings import LeaderSettings
from controller.kube.gateway import KubeGateway
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.kube_fixtures import FakeClock
from watchers.leader import LeaderElector

LEASE = {
    "apiVersion": "coordination.k8s.io/v1",
    "kind": "Lease",
    "metadata": {"namespace": "mpijc", "name": "watchers"},
}
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def leader_settings(identity: str) -> LeaderSettings:
    return LeaderSettings(
        enabled=True,
        lease_name="watchers",
        lease_namespace="mpijc",
        identity=identity,
        lease_duration_s=15,
        renew_period_s=0.02,
    )


@dataclass
class Replica:
    """One elector and a record of its leading coroutine's life."""

    elector: LeaderElector
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    started: int = 0
    cancelled: int = 0
    task: asyncio.Task[None] | None = None

    @property
    def leading(self) -> bool:
        return self.started > self.cancelled

    async def work(self) -> None:
        self.started += 1
        try:
            await asyncio.Event().wait()  # the watchers would run here
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    def start(self) -> None:
        self.task = asyncio.create_task(self.elector.run(self.work, self.stop))


@contextlib.asynccontextmanager
async def replicas(gateway: KubeGateway, clock: FakeClock, *names: str) -> AsyncIterator[list[Replica]]:
    group = [Replica(LeaderElector(gateway, leader_settings(name), clock=clock)) for name in names]
    try:
        yield group
    finally:
        for replica in group:
            replica.stop.set()
        await asyncio.gather(*(r.task for r in group if r.task is not None), return_exceptions=True)


@contextlib.asynccontextmanager
async def a_leading_b_following(
    gateway: KubeGateway, clock: FakeClock
) -> AsyncIterator[tuple[Replica, Replica]]:
    """Replica a started and leading, then replica b started beside it."""
    async with replicas(gateway, clock, "replica-a", "replica-b") as (a, b):
        a.start()
        await until(lambda: a.leading)
        b.start()
        yield a, b


async def test_of_two_replicas_exactly_one_leads(sim: SimCluster, gateway: KubeGateway) -> None:
    clock = FakeClock()
    async with replicas(gateway, clock, "replica-a", "replica-b") as (a, b):
        a.start()
        b.start()
        await until(lambda: a.leading or b.leading)
        for _ in range(20):  # ten renew periods and more
            assert a.leading != b.leading
            assert a.elector.is_leader == a.leading and b.elector.is_leader == b.leading
            await asyncio.sleep(0.01)
        leader = "replica-a" if a.leading else "replica-b"

        spec = (sim.get(LEASE) or {})["spec"]
        assert spec["holderIdentity"] == leader
        assert spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        assert MICRO_TIME.match(spec["acquireTime"]) and MICRO_TIME.match(spec["renewTime"])
        assert a.started + b.started == 1


async def test_a_follower_takes_over_once_the_crashed_leader_lease_expires(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    clock = FakeClock()
    async with a_leading_b_following(gateway, clock) as (a, b):
        await asyncio.sleep(0.1)
        assert not b.leading

        assert a.task is not None
        a.task.cancel()  # a crash: no release, renewals just stop
        await asyncio.gather(a.task, return_exceptions=True)
        assert a.cancelled == 1
        await asyncio.sleep(0.1)  # a renewal already in flight in a worker thread still lands

        clock.advance(14)
        await asyncio.sleep(0.1)
        assert not b.leading, "the lease has not expired yet"
        clock.advance(2)
        await until(lambda: b.leading, timeout_s=2)

        spec = (sim.get(LEASE) or {})["spec"]
        assert spec["holderIdentity"] == "replica-b"
        assert spec["leaseTransitions"] == 1


async def test_a_stopped_leader_releases_the_lease_for_an_immediate_takeover(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    clock = FakeClock()
    async with a_leading_b_following(gateway, clock) as (a, b):
        a.stop.set()
        await until(lambda: b.leading, timeout_s=2)  # the clock never moved
        assert a.cancelled == 1
        assert (sim.get(LEASE) or {})["spec"]["holderIdentity"] == "replica-b"


async def test_a_leader_that_cannot_renew_steps_down_before_anyone_may_take_over(
    sim: SimCluster, gateway: KubeGateway
) -> None:
    clock = FakeClock()
    async with replicas(gateway, clock, "replica-a") as (a,):
        a.start()
        await until(lambda: a.leading)
        sim.fail_next(100_000, 503, match="/leases")
        clock.advance(5)
        await asyncio.sleep(0.1)
        assert a.leading, "a few failed renewals are tolerated"
        clock.advance(9.99)  # past the renew deadline: lease duration - renew period = 14.98 s
        await until(lambda: not a.leading, timeout_s=2)
        assert not a.elector.is_leader

        sim.clear_failures()
        await until(lambda: a.leading, timeout_s=2)  # still its own lease: it leads again
        assert a.started == 2
