"""From a Kubernetes watch event to PostgreSQL: the real client against the simulated API server,
real NATS JetStream, the history consumer and real PostgreSQL; then the watcher killed and
restarted while the cluster changes."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import func, select

from controller.contract.settings import Settings
from controller.kube.resources import WATCHED
from controller.store.models import PodRow, PodStateRow, Run
from controller.testing import objects as k
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.conftest import Stage
from tests.pipeline_fixtures import EndToEnd, consumers_running, wait_for_sql


async def test_worker_oom_travels_from_watch_to_history(end_to_end: EndToEnd) -> None:
    async with end_to_end.running():
        # pods and a scheduling event first: the correlator must hold them until the job shows up
        job = k.mpijob("llm", workers=2)
        pods = [k.pod(job, "launcher", node="cpu-1")] + [
            k.pod(job, "worker", i, node=f"gpu-{i}") for i in range(2)
        ]
        for pod in pods:
            end_to_end.sim.create(pod)
        end_to_end.sim.create(
            k.event(
                pods[2], "Scheduled", "Successfully assigned team-a/llm-worker-1 to gpu-1", type_="Normal"
            )
        )
        end_to_end.sim.create(job)
        end_to_end.sim.update(k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z")))
        for pod in pods:
            end_to_end.sim.update(
                k.with_container_state(
                    pod, {"running": {"startedAt": "2026-11-20T10:01:00Z"}}, phase="Running", ready=True
                )
            )
        end_to_end.sim.set_log("team-a", "llm-worker-1", "worker", "step 99 loss 1.7\nKilled\n")
        end_to_end.sim.update(
            k.with_container_state(
                end_to_end.sim.get(pods[2]),
                {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "OOMKilled",
                        "finishedAt": "2026-11-20T10:09:00Z",
                    }
                },
                phase="Failed",
            )
        )
        end_to_end.sim.update(
            k.with_conditions(end_to_end.sim.get(job), ("Failed", "MPIJobFailed", "2026-11-20T10:09:30Z"))
        )

        await end_to_end.until_sql("SELECT phase FROM runs", "Failed")
        await wait_for_sql(
            end_to_end.engine, "SELECT count(*) FROM timeline WHERE summary LIKE '%OOMKilled (exit 137)'", 1
        )
        await end_to_end.until_sql("SELECT count(*) FROM k8s_events", 1)
        # one watch connection per resource kind, however many jobs and pods there are
        assert sorted(end_to_end.sim.open_watches().values()) == [1] * len(WATCHED)

    async with end_to_end.engine.connect() as conn:
        worker = (await conn.execute(select(PodRow).where(PodRow.name == "llm-worker-1"))).one()
        tail = (
            (
                await conn.execute(
                    select(PodStateRow.log_tail)
                    .where(PodStateRow.pod_uid == worker.uid)
                    .order_by(PodStateRow.resource_version.desc())
                )
            )
            .scalars()
            .first()
        )
    assert (worker.role, worker.index, worker.phase) == ("worker", 1, "Failed")
    assert tail == ["step 99 loss 1.7", "Killed"]


def kubeconfig(sim: SimCluster, path: Path) -> Path:
    return sim.kubeconfig(path)


def start_watcher(settings: Settings, config: Path, log: Path) -> subprocess.Popen[bytes]:
    return start_cli(
        ["watch"], cli_env(settings, config.parent, MPIJC_KUBE__KUBECONFIG=str(config)), config.parent, log
    )


@pytest.mark.slow
async def test_watcher_killed_mid_stream_catches_up_without_duplicates(
    sim: SimCluster,
    stage: Stage,
    tmp_path: Path,
) -> None:
    config, log = kubeconfig(sim, tmp_path / "kubeconfig"), tmp_path / "watcher.log"
    jobs = [k.mpijob(f"job-{i}", workers=3) for i in range(20)]
    pods = {j["metadata"]["name"]: [k.pod(j, "worker", w) for w in range(3)] for j in jobs}
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        first = start_watcher(stage.settings, config, log)
        try:
            await until(
                lambda: sum(sim.open_watches().values()) == len(WATCHED), 30, lambda: log.read_text()[-2000:]
            )
            for job in jobs:
                sim.create(job)
                for pod in pods[job["metadata"]["name"]]:
                    sim.create(pod)
            await wait_for_sql(stage.engine, "SELECT count(*) FROM pods", 60)
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait(10)

        # the cluster moves on while no watcher runs: every pod runs, half the jobs finish
        for job in jobs:
            for pod in pods[job["metadata"]["name"]]:
                sim.update(
                    k.with_container_state(
                        sim.get(pod),
                        {"running": {"startedAt": "2026-11-20T10:01:00Z"}},
                        phase="Running",
                        ready=True,
                    )
                )
        for job in jobs[:10]:
            sim.update(
                k.with_conditions(sim.get(job), ("Succeeded", "MPIJobSucceeded", "2026-11-20T11:00:00Z"))
            )

        second = start_watcher(stage.settings, config, log)
        try:
            await wait_for_sql(
                stage.engine, "SELECT count(*) FROM pods WHERE phase = 'Running'", 60, timeout_s=30
            )
            await wait_for_sql(stage.engine, "SELECT count(*) FROM runs WHERE phase = 'Succeeded'", 10)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(20)
    assert second.returncode == 0, log.read_text()[-3000:]

    async with stage.engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(Run))).scalar_one() == 20
        # exactly two versions of every pod (created, running): relisting duplicated nothing
        per_pod = (
            (await conn.execute(select(func.count()).select_from(PodStateRow).group_by(PodStateRow.pod_uid)))
            .scalars()
            .all()
        )
    assert sorted(set(per_pod)) == [2] and len(per_pod) == 60
