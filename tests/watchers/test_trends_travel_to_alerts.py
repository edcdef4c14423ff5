"""End to end: a run in the simulated cluster whose worker 0 leaks memory toward its limit and
whose worker 2 runs its GPUs below its peers'; the watcher reads a real Prometheus, the readings
travel the bus, and the rules consumer's oom-predicted and straggler findings reach the history
and the notify consumer's Alertmanager sink under their alert names, like any other finding."""

from __future__ import annotations

from controller.testing.ports import free_port
from tests.pipeline_fixtures import EndToEnd
from tests.usage_fixtures import Curves, usage_settings

GIB = 2**30


async def test_trend_findings_travel_from_prometheus_to_history_and_alerts(
    curves: Curves,
    end_to_end: EndToEnd,
) -> None:
    nowhere = (
        f"http://127.0.0.1:{free_port()}"  # the alert is stored for the pusher whether it answers or not
    )
    settings = end_to_end.settings.model_copy(
        update={
            "usage": usage_settings(curves.prometheus.url, refresh_s=5, curve_points=120),
            "rules": end_to_end.settings.rules.model_copy(
                update={"oom_trend_s": 8.0, "oom_horizon_s": 120.0, "straggler_s": 8.0, "gpu_idle_s": 3.0}
            ),
            "notify": end_to_end.settings.notify.model_copy(
                update={
                    "alertmanager": end_to_end.settings.notify.alertmanager.model_copy(
                        update={"urls": [nowhere]}
                    )
                }
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

    async with end_to_end.running(settings):
        end_to_end.start_run("llm", 3)

        await end_to_end.until_sql(
            "SELECT count(*) FROM findings WHERE rule = 'oom-predicted' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 0''s memory working set is growing %'",
            1,
            timeout_s=45,
        )
        await end_to_end.until_sql(
            "SELECT count(*) FROM findings WHERE rule = 'straggler' AND status = 'firing' "
            "AND root_cause LIKE 'Worker 2 is a straggler: its GPUs have run at 40 %'",
            1,
            timeout_s=45,
        )
        await end_to_end.until_sql(
            "SELECT string_agg(labels->>'alertname', ',' ORDER BY labels->>'alertname') FROM notify_alerts "
            "WHERE labels->>'alertname' IN ('TrainingJobOOMPredicted', 'TrainingJobStraggler')",
            "TrainingJobOOMPredicted,TrainingJobStraggler",
            timeout_s=30,
        )
