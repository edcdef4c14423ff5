"""End to end: a run in the simulated cluster whose worker 0 leaks memory toward its limit and
whose worker 2 runs its GPUs below its peers'; the watcher reads a real Prometheus, the readings
travel the bus, and the rules consumer's oom-predicted and straggler findings reach the history
and the notify consumer's Alertmanager sink under their alert names, like any other finding."""

from __future__ import annotations

from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.simcluster import SimCluster
from tests.history.test_end_to_end_watch_to_history import controller_running, wait_for_sql
from tests.trend_fixtures import Curves, curves  # noqa: F401 (the fixture)
from tests.usage_fixtures import usage_settings

GIB = 2**30


async def test_trend_findings_travel_from_prometheus_to_history_and_alerts(
    curves: Curves,  # noqa: F811
    sim: SimCluster,
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> None:
    nowhere = (
        f"http://127.0.0.1:{free_port()}"  # the alert is stored for the pusher whether it answers or not
    )
    settings = settings.model_copy(
        update={
            "usage": usage_settings(curves.prometheus.url, refresh_s=5, curve_points=120),
            "rules": settings.rules.model_copy(
                update={"oom_trend_s": 8.0, "oom_horizon_s": 120.0, "straggler_s": 8.0, "gpu_idle_s": 3.0}
            ),
            "notify": settings.notify.model_copy(
                update={"alertmanager": settings.notify.alertmanager.model_copy(update={"urls": [nowhere]})}
            ),
        }
    )
    exporter = curves.exporter
    exporter.memory_curve("team-a", "llm-worker-0", lambda t: 8 * GIB + 0.2 * GIB * t)
    exporter.memory_curve("team-a", "llm-worker-1", lambda t: 6 * GIB)
    exporter.memory_curve("team-a", "llm-worker-2", lambda t: 6 * GIB)
    for index, util in enumerate([93.0, 91.0, 40.0]):
        exporter.util_curve("team-a", f"llm-worker-{index}", "0", lambda t, u=util: u)
    await curves.prometheus.scraped('DCGM_FI_DEV_GPU_UTIL{exported_pod="llm-worker-2"}')

    async with controller_running(settings, sim, js, topology, engine, metrics):
        job = k.mpijob("llm", workers=3, gpus=1)
        sim.create(job)
        sim.update(k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z")))
        for pod in [k.pod(job, "launcher", node="cpu-1")] + [
            k.pod(job, "worker", i, node=f"gpu-{i}") for i in range(3)
        ]:
            sim.create(pod)
            sim.update(k.with_container_state(pod, {"running": {}}, phase="Running", ready=True))

        await wait_for_sql(
            engine,
            "SELECT count(*) FROM findings WHERE rule = 'oom-predicted' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 0''s memory working set is growing %'",
            1,
            timeout_s=45,
        )
        await wait_for_sql(
            engine,
            "SELECT count(*) FROM findings WHERE rule = 'straggler' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 2 is a straggler: its GPUs have run at 40 %'",
            1,
            timeout_s=45,
        )
        await wait_for_sql(
            engine,
            "SELECT string_agg(labels->>'alertname', ',' ORDER BY labels->>'alertname') FROM notify_alerts "
            "WHERE labels->>'alertname' IN ('TrainingJobOOMPredicted', 'TrainingJobStraggler')",
            "TrainingJobOOMPredicted,TrainingJobStraggler",
            timeout_s=30,
        )
