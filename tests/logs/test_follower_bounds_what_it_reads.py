"""What a container prints is bounded before it is kept, and loses nothing around it: a 10 MiB
line keeps its first ``max_line_bytes`` and says how much went, invalid UTF-8 is replaced, NUL
bytes are removed, secrets redacted, ranks read from the launchers' prefixes. A replica follows at
most ``max_follows`` containers, failing runs first; a run stops being followed at its byte cap."""

from __future__ import annotations

import asyncio

from nats.aio.client import Client as NATS

from controller.contract.settings import LogSettings
from controller.contract.subjects import Topology
from controller.testing import objects as k
from controller.testing.waits import until
from tests.log_fixtures import RUNNING, Logged, stored, stored_texts


async def test_a_huge_line_invalid_utf8_and_nul_are_bounded_and_lose_nothing_around_them(
    logged: Logged,
) -> None:
    run = logged.run("hostile")
    namespace, pod, container = run.pod(0)
    huge = b"x" * (10 * 1024 * 1024)
    logged.sim.set_log(
        namespace,
        pod,
        container,
        b"[1,3]<stdout>:before\n" + huge + b"\nbad \xff\xfe utf-8\nnul\x00byte\n"
        b"[rank5]:password=hunter2\n[default2]:after\n",
    )
    limits = LogSettings(retry_s=0.05, max_line_bytes=4096)

    async def count() -> int:
        return len(await logged.texts(run.job))

    async with logged.following(limits) as follow:
        follow.add(run)
        await until(lambda: _at_least(count, 6), 20.0)
    lines = [line for batch in await stored(logged.nc, logged.topology, run.job) for line in batch.lines]
    texts = [line.text for line in lines]
    assert texts[0] == "[1,3]<stdout>:before"
    kept, marker = texts[1].split(" ", 1)
    dropped = int(marker.removeprefix("[... ").removesuffix(" bytes of this line dropped]"))
    assert set(kept) == {"x"} and len(kept) <= 4096 and len(kept) + dropped == len(huge)
    assert texts[2:] == [
        "bad \ufffd\ufffd utf-8",
        "nulbyte",
        "[rank5]:password=[REDACTED]",
        "[default2]:after",
    ]
    assert [line.rank for line in lines] == [3, None, None, None, 5, 2]


async def test_beyond_the_bound_failing_runs_are_followed_first(logged: Logged) -> None:
    healthy = logged.run("healthy", workers=0, created="2026-11-20T09:00:00Z")
    failing = logged.run("failing", workers=1, created="2026-11-20T10:00:00Z")
    restarted = k.with_container_state(failing.pods[1], RUNNING, phase="Running", ready=True, restarts=1)
    logged.sim.update(restarted)
    failing.pods[1] = restarted
    limits = LogSettings(retry_s=0.05, max_follows=1)
    async with logged.following(limits) as follow:
        follow.add(healthy)
        await until(lambda: set(logged.sim.open_log_follows()) == {("team-a", healthy.pod(0)[1])}, 10.0)
        follow.add(failing)  # a worker restarted: the failing run's launcher takes the one place
        await until(lambda: set(logged.sim.open_log_follows()) == {("team-a", failing.pod(0)[1])}, 10.0)
        assert len(follow.follower.following) == 1
        await until(lambda: follow.metrics.sample("mpijc_log_follows", state="beyond_bound") == 2, 10.0)


async def test_beyond_the_bound_a_run_whose_launcher_went_quiet_comes_before_busy_ones(
    logged: Logged,
) -> None:
    busy = logged.run("busy", workers=0, created="2026-11-20T09:00:00Z")
    quiet = logged.run("quiet", workers=0, created="2026-11-20T10:00:00Z")
    limits = LogSettings(retry_s=0.05, max_follows=1)
    async with logged.following(limits) as follow:
        follow.add(busy)
        follow.add(quiet)
        await until(
            lambda: set(logged.sim.open_log_follows()) == {("team-a", busy.pod(0)[1])}, 10.0
        )  # the oldest
        follow.follower.quiet(busy.job.uid, 40)
        follow.follower.quiet(quiet.job.uid, 0)  # the progress probe read nothing new: maybe hanging
        await until(lambda: set(logged.sim.open_log_follows()) == {("team-a", quiet.pod(0)[1])}, 10.0)


async def test_a_run_is_followed_up_to_its_byte_cap_and_says_so(logged: Logged) -> None:
    run = logged.run("chatty")
    namespace, pod, container = run.pod(0)
    limits = LogSettings(retry_s=0.05, run_max_bytes=2000, batch_max_bytes=4096)
    async with logged.following(limits) as follow:
        follow.add(run)
        logged.sim.append_log(
            namespace, pod, container, "".join(f"{i:099d}\n" for i in range(10))
        )  # 990 bytes
        await until(lambda: _at_least(lambda: _count(logged.nc, logged.topology, run), 10), 10.0)
        logged.sim.append_log(
            namespace, pod, container, "".join(f"{i:099d}\n" for i in range(20))
        )  # past the cap
        await until(lambda: _capped(logged.nc, logged.topology, run), 10.0)
        await until(lambda: not logged.sim.open_log_follows(), 10.0)
        assert follow.metrics.sample("mpijc_log_capped_runs_total") == 1
    batches = await stored(logged.nc, logged.topology, run.job)
    assert sum(len(line.text) for b in batches for line in b.lines) <= 2000
    assert batches[-1].note and "cap of 2000 bytes" in batches[-1].note


async def _count(nc: NATS, topology: Topology, run: object) -> int:
    return len(await stored_texts(nc, topology, run.job))  # type: ignore[attr-defined]


async def _capped(nc: NATS, topology: Topology, run: object) -> bool:
    batches = await stored(nc, topology, run.job)  # type: ignore[attr-defined]
    return bool(batches) and batches[-1].position.capped


async def _at_least(count: object, wanted: int) -> bool:
    return await count() >= wanted  # type: ignore[operator,no-any-return]


async def test_a_partition_claimed_after_the_follower_closed_starts_no_follow(logged: Logged) -> None:
    """The log-follow leases' loop may claim a partition after the follower has closed (its loop
    ends last when the watcher stops): that claim starts no follow, whose reader would find the
    follower's threads gone and die unheard ("cannot schedule new futures after shutdown")."""
    run = logged.run("claimed-late")
    async with logged.following() as follow:
        follow.add(run)
        await until(lambda: len(follow.follower.following) == 2, 20.0)
    follower = follow.follower
    assert follower.following == frozenset()
    partition = follower.partition(run.job)
    await follower.let_go(partition)
    follower.hold(partition)
    assert follower.following == frozenset()
    await asyncio.sleep(0.2)
    assert follower.following == frozenset()
