"""Whole job stories as watch observations, in the order a cluster would produce them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from controller.testing import objects as k
from watchers.correlating import Observation

if TYPE_CHECKING:
    from controller.testing.simcluster import SimCluster

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
STORY_SPAN = timedelta(seconds=700)
"""Event time one :func:`oom_story` takes, from its job's creation to its failure and a little after."""


def at(seconds: int, start: datetime = T0) -> str:
    return (start + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def story_start(n: int) -> datetime:
    """When story ``n`` of a series begins: each after the one before has ended, as on a cluster.

    Stories fed one after another must move forward in event time: the rules measure stalls
    by the newest event seen, so a story replayed at a time already passed would look like a
    launcher waiting ten minutes for its workers between any two batches."""
    return T0 + n * STORY_SPAN


def oom_story(
    name: str = "pi", workers: int = 4, created: str | None = None, start: datetime = T0
) -> list[Observation]:
    """An MPIJob whose worker 2 is OOMKilled: job, launcher, workers, scheduling event, failure.

    Its events happen from ``start`` (the job created then, unless ``created`` says otherwise)."""
    job = k.mpijob(name, workers=workers, created=created or at(0, start))
    obs = [Observation("job", "ADDED", job, start)]
    job = k.with_conditions(job, ("Created", "MPIJobCreated", at(1, start)))
    obs.append(Observation("job", "MODIFIED", job, start + timedelta(seconds=1)))
    pods = [k.pod(job, "launcher", node="cpu-node-1")] + [
        k.pod(job, "worker", i, node=f"gpu-node-a{i}") for i in range(workers)
    ]
    obs += [Observation("pod", "ADDED", p, start + timedelta(seconds=2)) for p in pods]
    obs.append(
        Observation(
            "event",
            "ADDED",
            k.event(
                pods[1],
                "Scheduled",
                f"Successfully assigned team-a/{pods[1]['metadata']['name']} to gpu-node-a0",
                type_="Normal",
            ),
            start + timedelta(seconds=3),
        )
    )
    running = [
        k.with_container_state(p, {"running": {"startedAt": at(20, start)}}, phase="Running", ready=True)
        for p in pods
    ]
    obs += [Observation("pod", "MODIFIED", p, start + timedelta(seconds=20)) for p in running]
    job = k.with_conditions(job, ("Running", "MPIJobRunning", at(21, start)))
    obs.append(Observation("job", "MODIFIED", job, start + timedelta(seconds=21)))
    victim = running[3]  # worker-2
    oom = k.with_container_state(
        victim,
        {
            "terminated": {
                "exitCode": 137,
                "reason": "OOMKilled",
                "startedAt": at(20, start),
                "finishedAt": at(600, start),
            }
        },
        phase="Failed",
    )
    obs.append(
        Observation(
            "pod", "MODIFIED", oom, start + timedelta(seconds=600), ("Epoch 3 step 1200 loss 2.31", "Killed")
        )
    )
    job = k.with_conditions(job, ("Failed", "MPIJobFailed", at(630, start)))
    obs.append(Observation("job", "MODIFIED", job, start + timedelta(seconds=630)))
    return obs


def oom_in(sim: SimCluster, name: str) -> k.Obj:
    """An MPIJob ``name`` with one worker created in ``sim``, then its worker OOM-killed: the job."""
    job = k.mpijob(name, workers=1)
    worker = k.pod(job, "worker", 0, node="gpu-0")
    sim.create(job)
    sim.create(worker)
    sim.update(k.oom_killed(worker))
    return job
