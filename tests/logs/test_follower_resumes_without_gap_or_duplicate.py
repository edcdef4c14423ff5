"""A followed log is stored whole and once: a stream that breaks in the middle of a line resumes
from the last line stored (``sinceTime`` of its second, the lines of that second already stored
dropped, also when they share one timestamp), and so does a new follower after a restart, from
nothing but the bus; when the container itself restarted before the broken follow was opened
again, what its old instance printed meanwhile is read from its ``previous=true`` log first.
Real client → simulated API server → real NATS."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

from controller.contract.logs import since_time
from controller.testing.simcluster import RecordedRequest, SimCluster
from controller.testing.waits import until
from tests.log_fixtures import Following, Logged, Run

T = 1_795_000_000 * 10**9
"""A kubelet timestamp (nanoseconds); lines written with it share it exactly."""


def lines(first: int, last: int) -> str:
    return "".join(f"step {i} loss 0.{i}\n" for i in range(first, last))


@dataclass
class Printing:
    """Pod 0 of a run, followed: where it prints, the follower, and whether ``n`` lines are stored."""

    sim: SimCluster
    run: Run
    namespace: str
    pod: str
    container: str
    follow: Following
    has: Callable[[int], Awaitable[bool]]

    def follows(self) -> list[RecordedRequest]:
        """The ``follow=true`` requests for the container's log so far."""
        return [
            r
            for r in self.sim.requests
            if r.path.endswith(f"/{self.pod}/log") and r.query.get("follow") == "true"
        ]

    def append(self, first: int, last: int, at_ns: int) -> None:
        """The container prints steps ``first`` to ``last`` - 1, stamped ``at_ns``."""
        self.sim.append_log(self.namespace, self.pod, self.container, lines(first, last), at_ns=at_ns)


@contextlib.asynccontextmanager
async def printed_and_followed(logged: Logged, name: str, steps: int) -> AsyncIterator[Printing]:
    """Pod 0 of a new run ``name`` having printed ``steps`` steps (at ``T``), followed until they
    are stored, while inside."""
    run = logged.run(name)
    namespace, pod, container = run.pod(0)
    logged.sim.set_log(namespace, pod, container, lines(0, steps), at_ns=T)
    has = logged.has(run.job)
    async with logged.following() as follow:
        follow.add(run)
        await until(lambda: has(steps), 10.0)
        yield Printing(logged.sim, run, namespace, pod, container, follow, has)


async def test_a_stream_broken_in_mid_line_resumes_without_gap_or_duplicate(logged: Logged) -> None:
    expected = [f"step {i} loss 0.{i}" for i in range(12)]
    async with printed_and_followed(logged, "cut", 5) as p:
        logged.sim.cut_log_follows()  # the next lines go out up to the middle of the last one
        p.append(5, 10, at_ns=T)  # the same timestamp still
        await until(lambda: p.has(9), 10.0)  # step 9 was cut in half: read again
        p.append(10, 12, at_ns=T + 1_500_000_000)
        await until(lambda: p.has(12), 10.0)
        assert p.follow.metrics.sample("mpijc_log_reopened_total", reason="broken") >= 1
        assert p.follow.metrics.sample("mpijc_log_lines_total") == 12
    assert await logged.texts(p.run.job) == expected
    resumed = [r for r in logged.sim.requests if r.path.endswith(f"/{p.pod}/log") and "sinceTime" in r.query]
    assert resumed and resumed[0].query["sinceTime"] == since_time(T) == "2026-11-18T11:06:40Z"


async def test_a_restarted_follower_resumes_from_the_bus_without_gap_or_duplicate(logged: Logged) -> None:
    run = logged.run("restart", workers=1)
    for index in (0, 1):
        namespace, pod, container = run.pod(index)
        logged.sim.set_log(namespace, pod, container, lines(0, 3), at_ns=T + index)

    has = logged.has(run.job)

    async with logged.following() as follow:
        follow.add(run)
        await until(lambda: has(6), 10.0)
    for index in (0, 1):  # written while no follower ran, some within the same second
        namespace, pod, container = run.pod(index)
        logged.sim.append_log(namespace, pod, container, lines(3, 6), at_ns=T + index)
    async with logged.following() as follow:
        follow.add(run)
        await until(lambda: has(12), 10.0)
    for index in (0, 1):
        pod = run.pod(index)[1]
        assert await logged.texts(run.job, pod) == [f"step {i} loss 0.{i}" for i in range(6)]


async def test_a_stream_ended_while_the_container_runs_is_followed_again(logged: Logged) -> None:
    async with printed_and_followed(logged, "proxied", 3) as p:
        logged.sim.end_log_follows()  # a clean end, as a load balancer closing a long request
        # followed again before the next lines are printed: printed at once, they could still go
        # out on the ending stream, and the reopening be counted after they are stored
        await until(lambda: len(p.follows()) == 2, 10.0, p.follows)
        assert p.follows()[1].query.get("sinceTime") == since_time(T)
        assert p.follow.metrics.sample("mpijc_log_reopened_total", reason="ended") >= 1
        p.append(3, 6, at_ns=T + 1)
        await until(lambda: p.has(6), 10.0)
    assert await logged.texts(p.run.job) == [f"step {i} loss 0.{i}" for i in range(6)]


async def test_what_an_instance_printed_after_its_follow_broke_is_read_before_its_successor(
    logged: Logged,
) -> None:
    async with printed_and_followed(logged, "crashed", 3) as p:
        logged.sim.cut_log_follows()  # the follow breaks in the middle of step 5 ...
        p.append(3, 6, at_ns=T + 1_000_000_000)
        logged.sim.restart_container(p.namespace, p.pod, p.container)  # ... and it crashes and restarts
        p.append(6, 8, at_ns=T + 2_000_000_000)
        await until(lambda: p.has(8), 10.0)
    assert await logged.texts(p.run.job) == [f"step {i} loss 0.{i}" for i in range(8)]
    assert [r.query.get("sinceTime") for r in logged.sim.requests if r.query.get("previous") == "true"]
