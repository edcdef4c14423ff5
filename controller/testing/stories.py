"""Whole job stories as watch observations, in the order a cluster would produce them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.testing import objects as k
from watchers.correlating import Observation

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)


def at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def oom_story(name: str = "pi", workers: int = 4, created: str = "2026-11-20T10:00:00Z") -> list[Observation]:
    """An MPIJob whose worker 2 is OOMKilled: job, launcher, workers, scheduling event, failure."""
    job = k.mpijob(name, workers=workers, created=created)
    obs = [Observation("job", "ADDED", job, T0)]
    job = k.with_conditions(job, ("Created", "MPIJobCreated", at(1)))
    obs.append(Observation("job", "MODIFIED", job, T0 + timedelta(seconds=1)))
    pods = [k.pod(job, "launcher", node="cpu-node-1")] + [
        k.pod(job, "worker", i, node=f"gpu-node-a{i}") for i in range(workers)
    ]
    obs += [Observation("pod", "ADDED", p, T0 + timedelta(seconds=2)) for p in pods]
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
            T0 + timedelta(seconds=3),
        )
    )
    running = [
        k.with_container_state(p, {"running": {"startedAt": at(20)}}, phase="Running", ready=True)
        for p in pods
    ]
    obs += [Observation("pod", "MODIFIED", p, T0 + timedelta(seconds=20)) for p in running]
    job = k.with_conditions(job, ("Running", "MPIJobRunning", at(21)))
    obs.append(Observation("job", "MODIFIED", job, T0 + timedelta(seconds=21)))
    victim = running[3]  # worker-2
    oom = k.with_container_state(
        victim,
        {"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": at(20), "finishedAt": at(600)}},
        phase="Failed",
    )
    obs.append(
        Observation(
            "pod", "MODIFIED", oom, T0 + timedelta(seconds=600), ("Epoch 3 step 1200 loss 2.31", "Killed")
        )
    )
    job = k.with_conditions(job, ("Failed", "MPIJobFailed", at(630)))
    obs.append(Observation("job", "MODIFIED", job, T0 + timedelta(seconds=630)))
    return obs
