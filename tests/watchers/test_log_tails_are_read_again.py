"""A log tail the API server would not serve is read again while its pod exists, and handed over
with the pod's newest version once read; a deleted pod, a container running again or a final
answer (403, 404) ends the reading. Against the simulated API server, counted, never timed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from controller.contract.events import Change
from controller.contract.settings import WatcherSettings
from controller.kube.gateway import KubeGateway
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from watchers.tails import LogTails, Tails

SETTINGS = WatcherSettings(backoff_initial_s=0.02, backoff_max_s=0.1, log_tail_retry_s=30)
NCCL = "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE)\n"

Late = list[tuple[Change, Mapping[str, Any], Tails]]


def failed(sim: SimCluster, name: str = "pi", log: str = NCCL) -> dict[str, Any]:
    """Worker 0 of MPIJob ``name``, its container ended with exit code 1 and ``log`` written."""
    job = sim.create(k.mpijob(name, workers=1))
    pod = sim.create(k.pod(job, "worker", 0))
    sim.set_log("team-a", f"{name}-worker-0", "worker", log)
    ended = {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-20T10:09:00Z"}}
    return sim.update(k.with_container_state(pod, ended, phase="Failed"))


def log_reads(sim: SimCluster, pod: str) -> int:
    return sum(1 for r in sim.requests if r.path.endswith(f"/pods/{pod}/log"))


@pytest.fixture
def late() -> Late:
    """What the tails handed over late, in order."""
    return []


@pytest.fixture
async def tails(gateway: KubeGateway, late: Late) -> AsyncIterator[LogTails]:
    async def hand_over(change: Change, pod: Mapping[str, Any], log_tail: Tails) -> None:
        late.append((change, pod, log_tail))

    reader = LogTails(gateway, SETTINGS, hand_over)
    yield reader
    await reader.close()


async def test_a_refused_tail_is_read_again_and_handed_over_with_the_newest_version(
    sim: SimCluster, tails: LogTails, late: Late
) -> None:
    pod = failed(sim)
    sim.outage()

    assert await tails.for_pod("MODIFIED", pod) == {}
    await until(lambda: log_reads(sim, "pi-worker-0") >= 3)  # read again while the outage lasts
    newer = sim.update(pod)  # another version of the pod meanwhile: that one goes out again
    assert await tails.for_pod("MODIFIED", newer) == {}, "no second read while one is pending"
    sim.end_outage()
    await until(lambda: bool(late))

    ((change, version, log_tail),) = late
    assert (change, version["metadata"]["resourceVersion"]) == (
        "MODIFIED",
        newer["metadata"]["resourceVersion"],
    )
    assert log_tail == {"worker": (NCCL.strip(),)}
    assert tails.retrying == 0
    reads = log_reads(sim, "pi-worker-0")
    assert await tails.for_pod("MODIFIED", sim.update(newer)) == {} and log_reads(sim, "pi-worker-0") == reads


async def test_a_deleted_pod_is_not_read_again(sim: SimCluster, tails: LogTails, late: Late) -> None:
    pod = failed(sim)
    sim.outage()
    await tails.for_pod("MODIFIED", pod)
    await until(lambda: log_reads(sim, "pi-worker-0") >= 2)

    await tails.for_pod("DELETED", sim.delete(pod))
    reads = log_reads(sim, "pi-worker-0")
    sim.end_outage()
    await tails.for_pod("MODIFIED", failed(sim, "other"))  # read in the background: the last read failed
    await until(lambda: bool(late))

    assert [version["metadata"]["name"] for _, version, _ in late] == ["other-worker-0"]
    assert log_reads(sim, "pi-worker-0") == reads
    assert tails.retrying == 0


async def test_while_one_tail_is_read_again_a_new_failure_waits_in_the_background(
    sim: SimCluster, tails: LogTails, late: Late
) -> None:
    first, second = failed(sim, "first"), failed(sim, "second")
    sim.outage()
    await tails.for_pod("MODIFIED", first)
    reads = log_reads(sim, "second-worker-0")

    assert await tails.for_pod("MODIFIED", second) == {}
    assert log_reads(sim, "second-worker-0") == reads, "no read in the pod's update: the server struggles"
    sim.end_outage()
    await until(lambda: len(late) == 2)

    assert sorted(pod["metadata"]["name"] for _, pod, _ in late) == ["first-worker-0", "second-worker-0"]


@pytest.mark.parametrize("code", [403, 404])
async def test_a_final_answer_is_not_read_again(
    sim: SimCluster, tails: LogTails, late: Late, code: int
) -> None:
    pod = failed(sim)
    sim.fail_next(1, code, match="/log")

    assert await tails.for_pod("MODIFIED", pod) == {}
    assert await tails.for_pod("MODIFIED", sim.update(pod)) == {}

    assert tails.retrying == 0 and late == []
    assert log_reads(sim, "pi-worker-0") == 1


async def test_a_container_running_again_is_not_read_for_its_old_failure(
    sim: SimCluster, tails: LogTails, late: Late
) -> None:
    pod = failed(sim)
    sim.outage()
    await tails.for_pod("MODIFIED", pod)
    running = {"running": {"startedAt": "2026-11-20T10:10:00Z"}}
    await tails.for_pod(
        "MODIFIED", sim.update(k.with_container_state(pod, running, phase="Running", restarts=1))
    )
    sim.end_outage()

    await until(lambda: tails.retrying == 0)
    assert late == []
