"""A job's page in a real browser (Debian's chromium) follows the cluster itself: a job created in
the simulated Kubernetes API server goes Pending → Running → Failed through the real watchers,
NATS JetStream, the history and rules consumers and PostgreSQL, and the open page shows each phase
without a reload within 5 s of the API server's change, then the root cause the rules found."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.browser import By, WebDriver, chromium, seen, sign_in
from tests.history.test_end_to_end_watch_to_history import controller_running, wait_for_sql
from tests.live_events import FAST, serving

LIVE_S = 5.0
"""The issue's bound, from the API server's change to the open page."""
_T = TypeVar("_T")


async def _in_browser(call: Callable[[], _T]) -> _T:
    """Selenium blocks: it runs on a thread while this loop serves the API and runs the controller."""
    return await asyncio.to_thread(call)


def _text(selector: str, wanted: str) -> Callable[[WebDriver], bool]:
    return lambda d: any(wanted in e.text for e in d.find_elements(By.CSS_SELECTOR, selector))


async def test_a_job_in_the_cluster_goes_pending_running_failed_on_its_open_page(
    sim: SimCluster,
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
) -> None:
    job = k.mpijob("llm", workers=2, memory="16Gi")
    uid = job["metadata"]["uid"]
    pods = [k.pod(job, "launcher", node="cpu-1")] + [
        k.pod(job, "worker", i, node=f"gpu-{i}") for i in range(2)
    ]
    async with (
        controller_running(settings, sim, js, topology, engine, metrics),
        serving(engine, FAST) as api,
    ):
        sim.create(job)
        await wait_for_sql(engine, f"SELECT phase FROM runs WHERE uid = '{uid}'", "Pending")
        with chromium() as driver:
            await _in_browser(lambda: sign_in(driver, api.url, "token-alice", page=f"/ui/runs/{uid}"))
            await _in_browser(lambda: seen(driver, _text("#phase", "Pending"), LIVE_S, "the run Pending"))
            driver.execute_script("window.notReloaded = true")

            for pod in pods:
                sim.create(pod)
            sim.update(k.with_conditions(sim.get(job), ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z")))
            for pod in pods:
                running = {"running": {"startedAt": "2026-11-20T10:01:00Z"}}
                sim.update(k.with_container_state(sim.get(pod), running, phase="Running", ready=True))
            await _in_browser(lambda: seen(driver, _text("#phase", "Running"), LIVE_S, "the run Running"))

            sim.set_log("team-a", "llm-worker-1", "worker", "step 99 loss 1.7\nKilled\n")
            killed = {
                "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-20T10:09:00Z"}
            }
            sim.update(k.with_container_state(sim.get(pods[2]), killed, phase="Failed"))
            sim.update(k.with_conditions(sim.get(job), ("Failed", "MPIJobFailed", "2026-11-20T10:09:30Z")))
            await _in_browser(lambda: seen(driver, _text("#phase", "Failed"), LIVE_S, "the run Failed"))
            cause = "Worker 1 failed: out of memory"  # the oom rule's words, through the findings
            await _in_browser(lambda: seen(driver, _text(".root-cause", cause), LIVE_S, "the root cause"))
            assert driver.execute_script("return window.notReloaded") is True
