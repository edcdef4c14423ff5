"""A training-operator job, end to end: a PyTorchJob on the simulated API server, the real
watchers, NATS JetStream, the history and rules consumers and PostgreSQL. Its history row says
``PyTorchJob`` and its finding names the failing replica (``Worker-1``); a kind whose CRD is
installed only after the watcher started is watched from then on, without a restart."""

from __future__ import annotations

from sqlalchemy import select

from controller.kube.resources import JOB_RESOURCES, WATCHED
from controller.store.models import FindingRow, PodRow, Run
from controller.testing import objects as k
from controller.testing.simcluster import DEFAULT_KINDS, SimCluster
from controller.testing.waits import until
from tests.conftest import Stage
from tests.pipeline_fixtures import (
    EndToEnd,
    consumers_running,
    wait_for_sql,
    watchers_running,
)


async def test_pytorchjob_worker_oom_lands_in_history_naming_the_replica(end_to_end: EndToEnd) -> None:
    async with end_to_end.running():
        job = end_to_end.sim.create(k.training_job("PyTorchJob", "bert", replicas={"Master": 1, "Worker": 2}))
        pods = [k.replica_pod(job, "Master", 0, node="gpu-0")] + [
            k.replica_pod(job, "Worker", i, node=f"gpu-{i + 1}") for i in range(2)
        ]
        end_to_end.pods_started(job, pods, "PyTorchJobRunning")
        end_to_end.sim.update(k.oom_killed(end_to_end.sim.get(pods[2]), "2026-11-20T10:09:00Z"))  # Worker-1
        end_to_end.sim.update(
            k.with_conditions(end_to_end.sim.get(job), ("Failed", "PyTorchJobFailed", "2026-11-20T10:09:30Z"))
        )

        await end_to_end.until_sql("SELECT kind || ' ' || phase FROM runs", "PyTorchJob Failed")
        await end_to_end.until_sql("SELECT count(*) FROM findings WHERE rule = 'oom'", 1)
        await end_to_end.until_sql(
            "SELECT count(*) FROM timeline WHERE summary LIKE 'Worker-1 container pytorch terminated%'",
            1,
        )

    async with end_to_end.engine.connect() as conn:
        run = (await conn.execute(select(Run.kind, Run.name))).one()
        root_cause = (
            await conn.execute(select(FindingRow.root_cause).where(FindingRow.rule == "oom"))
        ).scalar_one()
        worker = (
            await conn.execute(
                select(PodRow.role, PodRow.index, PodRow.phase).where(PodRow.name == "bert-worker-1")
            )
        ).one()
    assert tuple(run) == ("PyTorchJob", "bert")
    assert root_cause.startswith("Worker-1 failed: out of memory"), root_cause
    assert tuple(worker) == ("worker", 1, "Failed")


async def test_a_crd_installed_later_is_watched_without_a_restart(stage: Stage) -> None:
    tfjobs = JOB_RESOURCES["TFJob"]
    quick = stage.settings.model_copy(
        update={"watcher": stage.settings.watcher.model_copy(update={"discovery_s": 0.2})}
    )
    with SimCluster(kinds=tuple(r for r in DEFAULT_KINDS if r != tfjobs)) as sim:
        async with (
            consumers_running(quick, stage.topology, stage.engine, stage.metrics),
            watchers_running(quick, sim, stage.js, stage.topology, stage.metrics),
        ):
            expected = len(WATCHED) - 1
            await until(
                lambda: sum(sim.open_watches().values()) == expected, 10, lambda: str(sim.open_watches())
            )
            assert str(tfjobs) not in sim.open_watches()

            sim.register(tfjobs)  # the training-operator is installed
            await until(lambda: str(tfjobs) in sim.open_watches(), 10, lambda: str(sim.open_watches()))
            sim.create(k.training_job("TFJob", "mnist", replicas={"Chief": 1, "PS": 1, "Worker": 2}))
            await wait_for_sql(stage.engine, "SELECT kind || ' ' || name FROM runs", "TFJob mnist")
