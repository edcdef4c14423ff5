"""The pages in a real browser (Debian's chromium), over the API served for real on a loopback port:
a job goes Pending → Running → Failed while the pages are open and they follow it without a
reload; the root cause is up front on the failed run; a worker's log line is in its Logs tab and a
search narrows the lines; the charts hold every served reading; another namespace's token sees
nothing of it; two attempts compare side by side.

With ``MPIJC_UI_SCREENSHOTS=<folder>`` (``make screenshots``: docs/ui/) every page it opens is
saved there as a PNG.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import httpx
from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.logs import RunLogs
from controller.bus.logstore import publish_batches
from controller.contract.subjects import Topology
from tests.api_fixtures import T0, fire, job_story, store
from tests.browser import By, WebDriver, chromium, click, screenshot, seen, sign_in
from tests.conftest import Stage
from tests.live_events import FAST, Writer, serving
from tests.log_fixtures import log_batch
from tests.ui.test_metrics_tab_shows_gpu_health import XID_AT, fire_gpu_findings, store_usage

GIB = 2**30
LIVE_S = 5.0
"""A run's page shows a change within this (the issue's bound; its event stream polls every 50 ms here)."""
LIST_S = 5.0 + 5.0
"""The job list asks every 5 s: a change shows within one round and its answer."""
SHOTS = Path(os.environ["MPIJC_UI_SCREENSHOTS"]) if os.environ.get("MPIJC_UI_SCREENSHOTS") else None
ROOT_CAUSE = "Worker 1 was OOM-killed at 15.9 GiB of its 16 GiB memory limit (exit 137)."
_T = TypeVar("_T")


async def _in_browser(call: Callable[[], _T]) -> _T:
    """Selenium blocks: it runs on a thread while this loop serves the API it talks to."""
    return await asyncio.to_thread(call)


def _phase_in_row(uid: str, phase: str) -> Callable[[WebDriver], bool]:
    def check(driver: WebDriver) -> bool:
        cells = driver.find_elements(By.CSS_SELECTOR, f'tr[data-uid="{uid}"] [data-phase]')
        return bool(cells) and cells[0].text == phase

    return check


def _text(selector: str, wanted: str) -> Callable[[WebDriver], bool]:
    return lambda d: any(wanted in e.text for e in d.find_elements(By.CSS_SELECTOR, selector))


def _worker_killed(driver: WebDriver) -> bool:
    killed = driver.find_element(By.XPATH, "//tr[td[1]='llm-worker-1']").text
    return "gpu-1" in killed and "OOMKilled (exit 137)" in killed


async def _logs_tab(
    driver: WebDriver, base: str, uid: str, js: JetStreamContext, topology: Topology, retry_s: float
) -> None:
    """A worker's line, merged by time, labelled; a search narrows; a line links to itself."""
    lines = [
        log_batch(
            uid,
            "llm-launcher",
            "launcher",
            [(31.0, 0, "step 1 loss 2.31"), (33.0, 1, "step 2 NCCL WARN retry")],
        ),
        log_batch(uid, "llm-worker-1", "worker", [(32.0, None, "CUDA error: an illegal memory access")]),
    ]
    await publish_batches(js, topology, lines, retry_s)
    await _in_browser(lambda: driver.get(f"{base}/ui/runs/{uid}?tab=logs"))
    shown = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#log li")]
    assert len(shown) == 3, shown
    assert "llm-worker-1" in shown[1] and "CUDA error: an illegal memory access" in shown[1]
    assert "rank 1" in shown[2]
    await _in_browser(lambda: screenshot(driver, SHOTS, "5-run-logs"))
    # follow: a line the worker prints now appears without a reload
    await _in_browser(driver.find_element(By.ID, "follow").click)
    await _in_browser(
        lambda: seen(
            driver, lambda d: d.execute_script("return document.readyState") == "complete", LIVE_S, "the page"
        )
    )
    now = time.time() - T0.timestamp()
    fresh = log_batch(uid, "llm-worker-0", "worker", [(now + 0.5, None, "step 3 loss 1.87 (followed)")])
    await publish_batches(js, topology, [fresh], retry_s)
    await _in_browser(
        lambda: seen(driver, _text("#log li", "step 3 loss 1.87 (followed)"), LIVE_S, "the followed line")
    )
    driver.find_element(By.ID, "q").send_keys("NCCL")
    search = driver.find_element(By.CSS_SELECTOR, "form[role=search] button[type=submit]")
    await _in_browser(search.click)  # a click that loads a page waits for this loop to serve it
    await _in_browser(lambda: seen(driver, lambda d: "q=NCCL" in d.current_url, LIVE_S, "the search"))
    narrowed = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#log li")]
    assert len(narrowed) == 1 and "NCCL WARN retry" in narrowed[0], narrowed
    link = driver.find_element(By.CSS_SELECTOR, "#log li a.at").get_attribute("href")
    assert link is not None
    await _in_browser(lambda: driver.get(link))
    assert driver.execute_script("return location.hash") == "#" + driver.find_element(
        By.CSS_SELECTOR, "#log li:target"
    ).get_attribute("id")


async def _metrics_tab(driver: WebDriver, base: str, uid: str, engine: AsyncEngine) -> None:
    """Every served reading of each worker is a point of its charts; worker 1's GPU fault is
    marked at its time and named in its GPU health table."""
    await store_usage(engine, uid)
    await fire_gpu_findings(engine, uid)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": "Bearer token-alice"}) as client:
        served = (await client.get(f"/api/v1/runs/{uid}")).json()["usage"]
    await _in_browser(lambda: driver.get(f"{base}/ui/runs/{uid}?tab=metrics"))
    sections = {
        s.find_element(By.TAG_NAME, "h3").text: s
        for s in driver.find_elements(By.CSS_SELECTOR, "section.pod-usage")
    }
    assert len(served) == 2 and sorted(sections) == sorted(pod["name"] for pod in served)
    for pod in served:
        figure = sections[pod["name"]].find_elements(By.CSS_SELECTOR, "svg.chart")
        assert len(figure) == 2, pod["name"]
        gpu, memory = (f.find_elements(By.CSS_SELECTOR, "circle.point") for f in figure)
        assert [float(p.get_attribute("data-value") or "nan") for p in gpu] == [
            v for _, v in pod["gpu_util_curve"]
        ]
        assert [float(p.get_attribute("data-value") or "nan") for p in memory] == [
            v for _, v in pod["memory_curve"]
        ]
        assert figure[1].find_elements(By.CSS_SELECTOR, "line.limit")  # against the limit
    xid_marks = sections["llm-worker-1"].find_elements(By.CSS_SELECTOR, 'g.mark-fault[data-label="Xid 79"]')
    assert [m.get_attribute("data-at") for m in xid_marks] == [XID_AT.isoformat()] * 2  # on both charts
    assert "Xid 79" in sections["llm-worker-1"].find_element(By.CSS_SELECTOR, "table.gpu-health").text
    assert not sections["llm-worker-0"].find_elements(By.CSS_SELECTOR, "g.mark")
    await _in_browser(lambda: screenshot(driver, SHOTS, "6-run-metrics"))


async def _other_tabs_and_compare(driver: WebDriver, base: str, uid: str) -> None:
    """The timeline holds the finding; the two attempts compare, reached from the run's page."""
    for tab, name in (
        ("configuration", "3-run-configuration"),
        ("workers", "4-run-workers"),
        ("events", "7-run-events"),
    ):
        await _in_browser(lambda tab=tab: driver.get(f"{base}/ui/runs/{uid}?tab={tab}"))  # type: ignore[misc]
        await _in_browser(lambda name=name: screenshot(driver, SHOTS, name))  # type: ignore[misc]
        if tab == "configuration":  # the job as submitted, in YAML
            limit = _text("pre#manifest", "limits:\n                memory: 16Gi")
            await _in_browser(lambda limit=limit: seen(driver, limit, LIVE_S, "the spec's memory limit"))  # type: ignore[misc]
            assert driver.find_element(By.ID, "manifest").text.startswith("apiVersion: kubeflow.org/v2beta1")
        if tab == "workers":  # each pod, its node, and how it ended
            await _in_browser(lambda: seen(driver, _worker_killed, LIVE_S, "worker 1's end"))
    for wanted in (ROOT_CAUSE, "Failed"):
        await _in_browser(lambda w=wanted: seen(driver, _text("ol.timeline", w), LIVE_S, w))  # type: ignore[misc]

    # Compare the two attempts, reached from the run's page
    await _in_browser(lambda: click(driver, "compare with this one"))
    await _in_browser(lambda: seen(driver, _text("h1", "Compare 2 runs"), LIVE_S, "the comparison"))
    diff = driver.find_element(By.CSS_SELECTOR, "table.diff").text
    assert "16Gi" in diff and "32Gi" in diff
    submitted = driver.find_element(By.CSS_SELECTOR, "pre.manifest-diff").text
    assert "-                memory: 32Gi" in submitted and "+                memory: 16Gi" in submitted
    assert ROOT_CAUSE in driver.find_element(By.TAG_NAME, "main").text
    await _in_browser(lambda: screenshot(driver, SHOTS, "8-compare"))


async def _another_namespace(base: str, uid: str) -> None:
    """bob reads team-b and shared: nothing of team-a, in the list or by its address."""
    with chromium() as driver:
        await _in_browser(lambda: sign_in(driver, base, "token-bob"))
        assert not driver.find_elements(By.CSS_SELECTOR, "tr[data-uid]")
        assert "llm" not in driver.find_element(By.TAG_NAME, "main").text
        await _in_browser(lambda: driver.get(f"{base}/ui/runs/{uid}"))
        assert "no run with uid" in driver.find_element(By.TAG_NAME, "main").text
        assert ROOT_CAUSE not in driver.page_source
        await _in_browser(lambda: driver.get(f"{base}/ui/sign-in"))
        await _in_browser(lambda: screenshot(driver, SHOTS, "0-sign-in"))


async def test_pages_follow_a_failing_job_live_and_show_only_what_the_caller_may_read(stage: Stage) -> None:
    earlier, story = job_story("llm", workers=2, memory="32Gi", start=T0 - timedelta(hours=2))
    await store(stage.engine, story)
    uid, story = job_story("llm", workers=2, memory="16Gi", outcome="Failed", oom_worker=1)
    created, pods_up, failing = story[:4], story[4:8], story[8:]
    other, other_story = job_story(
        "bert", workers=1, outcome="Failed", oom_worker=0, start=T0 + timedelta(hours=1)
    )
    writer = Writer(stage.engine)
    await writer.write(created + other_story[:3])
    async with serving(stage.engine, FAST, run_logs=RunLogs(stage.js, stage.topology)) as api:
        with chromium() as driver:
            base = api.url
            # the list, signed in as alice (team-a): Pending, then Running without a reload
            await _in_browser(lambda: sign_in(driver, base, "token-alice"))
            await _in_browser(lambda: seen(driver, _phase_in_row(uid, "Pending"), LIVE_S, "the run Pending"))
            await writer.write(pods_up)
            await _in_browser(
                lambda: seen(driver, _phase_in_row(uid, "Running"), LIST_S, "the list's row Running")
            )
            assert driver.find_elements(By.CSS_SELECTOR, f'tr[data-uid="{earlier}"]')  # every attempt listed
            # another run fails while the list is open: its phase and its finding's sentence, no reload
            driver.execute_script("window.notReloaded = true")
            await fire(
                stage.engine,
                other,
                "team-a",
                "bert",
                "oom",
                "Worker 0 was OOM-killed.",
                T0 + timedelta(hours=1),
            )
            await writer.write(other_story[3:])
            await _in_browser(
                lambda: seen(driver, _phase_in_row(other, "Failed"), LIST_S, "bert's row Failed")
            )
            await _in_browser(
                lambda: seen(
                    driver, _text(f'tr[data-uid="{other}"] .why', "Worker 0 was OOM-killed."), LIVE_S, "why"
                )
            )
            assert driver.execute_script("return window.notReloaded") is True

            # the run's page: Running, then Failed with its root cause up front, without a reload
            await _in_browser(lambda: driver.get(f"{base}/ui/runs/{uid}"))
            await _in_browser(lambda: seen(driver, _text("#phase", "Running"), LIVE_S, "the run's page"))
            driver.execute_script("window.notReloaded = true")
            await fire(stage.engine, uid, "team-a", "llm", "oom", ROOT_CAUSE, T0 + timedelta(seconds=590))
            await writer.write(failing)
            await _in_browser(lambda: seen(driver, _text("#phase", "Failed"), LIVE_S, "the phase Failed"))
            await _in_browser(
                lambda: seen(driver, _text(".root-cause", ROOT_CAUSE), LIVE_S, "the root cause")
            )
            assert driver.execute_script("return window.notReloaded") is True
            await _in_browser(
                lambda: seen(driver, _text("#cause", "Increase worker memory."), LIVE_S, "the remedy")
            )
            await _in_browser(lambda: screenshot(driver, SHOTS, "2-run-overview"))

            # the list again: the failed run's newest finding beside it
            await _in_browser(lambda: driver.get(f"{base}/ui/jobs"))
            row = driver.find_element(By.CSS_SELECTOR, f'tr[data-uid="{uid}"]')
            assert "Failed" in row.text and ROOT_CAUSE in row.text
            await _in_browser(lambda: screenshot(driver, SHOTS, "1-jobs"))

            # Logs: a worker's line, merged by time, labelled; a search narrows; a line links to itself
            await _logs_tab(driver, base, uid, stage.js, stage.topology, stage.settings.nats.publish_retry_s)
            await _metrics_tab(driver, base, uid, stage.engine)
            await _other_tabs_and_compare(driver, base, uid)
        await _another_namespace(api.url, uid)
