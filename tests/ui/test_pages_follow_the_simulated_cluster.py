"""A job's page in a real browser (Debian's chromium) follows the cluster itself: a job created in
the simulated Kubernetes API server goes Pending → Running → Failed through the real watchers,
NATS JetStream, the history and rules consumers and PostgreSQL, and the open page shows each phase
without a reload within 5 s of the API server's change, then the root cause the rules found."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from controller.testing import objects as k
from tests.browser import By, WebDriver, chromium, seen, sign_in
from tests.live_events import FAST, serving
from tests.pipeline_fixtures import EndToEnd

LIVE_S = 5.0
"""The issue's bound, from the API server's change to the open page."""
_T = TypeVar("_T")


async def _in_browser(call: Callable[[], _T]) -> _T:
    """Selenium blocks: it runs on a thread while this loop serves the API and runs the controller."""
    return await asyncio.to_thread(call)


def _text(selector: str, wanted: str) -> Callable[[WebDriver], bool]:
    return lambda d: any(wanted in e.text for e in d.find_elements(By.CSS_SELECTOR, selector))


async def test_a_job_in_the_cluster_goes_pending_running_failed_on_its_open_page(
    end_to_end: EndToEnd,
) -> None:
    job = k.mpijob("llm", workers=2, memory="16Gi")
    uid = job["metadata"]["uid"]
    pods = [k.pod(job, "launcher", node="cpu-1")] + [
        k.pod(job, "worker", i, node=f"gpu-{i}") for i in range(2)
    ]
    async with (
        end_to_end.running(),
        serving(end_to_end.engine, FAST) as api,
    ):
        end_to_end.sim.create(job)
        await end_to_end.until_sql(f"SELECT phase FROM runs WHERE uid = '{uid}'", "Pending")
        with chromium() as driver:
            await _in_browser(lambda: sign_in(driver, api.url, "token-alice", page=f"/ui/runs/{uid}"))
            await _in_browser(lambda: seen(driver, _text("#phase", "Pending"), LIVE_S, "the run Pending"))
            driver.execute_script("window.notReloaded = true")

            end_to_end.pods_started(job, pods, "MPIJobRunning")
            await _in_browser(lambda: seen(driver, _text("#phase", "Running"), LIVE_S, "the run Running"))

            end_to_end.sim.set_log("team-a", "llm-worker-1", "worker", "step 99 loss 1.7\nKilled\n")
            killed = {
                "terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-20T10:09:00Z"}
            }
            end_to_end.sim.update(k.with_container_state(end_to_end.sim.get(pods[2]), killed, phase="Failed"))
            end_to_end.sim.update(
                k.with_conditions(end_to_end.sim.get(job), ("Failed", "MPIJobFailed", "2026-11-20T10:09:30Z"))
            )
            await _in_browser(lambda: seen(driver, _text("#phase", "Failed"), LIVE_S, "the run Failed"))
            cause = "Worker 1 failed: out of memory"  # the oom rule's words, through the findings
            await _in_browser(lambda: seen(driver, _text(".root-cause", cause), LIVE_S, "the root cause"))
            assert driver.execute_script("return window.notReloaded") is True
