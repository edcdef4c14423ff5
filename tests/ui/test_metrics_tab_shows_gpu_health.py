"""The Metrics tab shows how a run's GPUs fared, from what the API serves for the run: a mark on
the pod's charts where its GPU reported an Xid (named with the catalogue's meaning in the pod's
GPU health table), a band where the hardware held the clocks down, a mark where a ``gpu-fault``
or ``oom-predicted`` finding naming the pod was first seen, the memory's projection to its limit
for ``oom-predicted``; a pod no finding names and whose GPUs reported nothing carries no mark.

:func:`store_usage` is also the browser test's (and the screenshots') data.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.events import GpuHealth, GpuUsage, JobRef
from controller.contract.findings import Evidence, Finding, RuleId, dedup_key, doc_anchor, finding_id
from controller.contract.xids import xid
from controller.store.history import apply_findings
from controller.store.models import PodRow
from tests.api_fixtures import T0, job_story, store, store_worker_usage
from tests.ui.test_pages_sign_in_safely import SAME_SITE, _client

GIB = 2**30
STEPS = [T0 + timedelta(seconds=30 + 60 * i) for i in range(9)]
"""When each worker's usage was read."""
XID_AT = STEPS[6]
HOT = (STEPS[2], STEPS[4])
"""Worker 1's GPU 0 is held down by a hardware thermal slowdown over this spell."""
FORESEEN = STEPS[4]
"""When ``oom-predicted`` read worker 1's climb."""
GPU_FAULT = "Worker 1's GPU 0 on node gpu-1 reported Xid 79 (the GPU has fallen off the bus)."
OOM_PREDICTED = (
    "Worker 1's memory working set is growing 0.70 GiB/min: it reaches the limit around 10:08 UTC."
)


def _health() -> GpuHealth:
    return GpuHealth(
        hostname="gpu-1",
        pci_bus_id="00000000:3B:00.0",
        xid=((STEPS[0], 0.0), (STEPS[5], 0.0), (XID_AT, 79.0), (STEPS[8], 79.0)),
        throttle_reasons=((STEPS[0], 0.0), (HOT[0], 0x40), (HOT[1], 0x4), (STEPS[8], 0.0)),
        temperature_c=((STEPS[0], 61.0), (HOT[0], 87.0), (STEPS[8], 83.0)),
    )


async def store_usage(engine: AsyncEngine, uid: str, *, gpu_health: bool = True) -> None:
    """GPU and memory readings over time of each worker, as the watcher publishes them; worker 1's
    GPU reported a thermal slowdown and then Xid 79 (``gpu_health``)."""

    def figures(pod: PodRow) -> dict[str, Any]:
        gpu = GpuUsage(
            gpu="0",
            model="NVIDIA H100 80GB HBM3",
            util_mean_pct=60.0,
            health=_health() if gpu_health and pod.index == 1 else None,
        )
        return {
            "since": STEPS[0],
            "until": STEPS[-1],
            "final": False,
            "gpus": (gpu,),
            "memory_max_bytes": (10 + 0.7 * 8 + pod.index) * GIB,
            "memory_limit_bytes": 16 * GIB,
            "memory_curve": tuple((at, (10 + 0.7 * i + pod.index) * GIB) for i, at in enumerate(STEPS)),
            "gpu_util_curve": tuple((at, 60.0 + 4 * i - 10 * pod.index) for i, at in enumerate(STEPS)),
        }

    await store_worker_usage(engine, uid, "llm", STEPS[-1], figures)


async def _store_finding(
    engine: AsyncEngine,
    uid: str,
    rule: RuleId,
    root_cause: str,
    evidence: Evidence,
    at: datetime,
    **fields: Any,
) -> None:
    fields = {"severity": "critical", "status": "firing", **fields}
    finding = Finding(
        id=finding_id(uid, rule),
        rule=rule,
        job=JobRef(uid=uid, kind="MPIJob", namespace="team-a", name="llm"),
        root_cause=root_cause,
        evidence=(evidence,),
        doc_anchor=doc_anchor(rule),
        dedup_key=dedup_key(uid, rule),
        first_seen=at,
        last_seen=at,
        **fields,
    )
    async with engine.begin() as conn:
        await apply_findings(conn, [finding])


async def fire_gpu_findings(engine: AsyncEngine, uid: str) -> None:
    """``gpu-fault`` on worker 1, firing, and ``oom-predicted``, resolved when the job ended, as the
    rules publish them."""
    pod = "pod/llm-worker-1"
    fault = Evidence(source=pod, field="gpus[0].xid", value="Xid 79: 79")
    await _store_finding(engine, uid, "gpu-fault", GPU_FAULT, fault, XID_AT + timedelta(seconds=20))
    trend = Evidence(source=pod, field="usage.memory.trend", value="0.70 GiB/min, tau 1.00")
    ended = T0 + timedelta(seconds=600)
    await _store_finding(
        engine,
        uid,
        "oom-predicted",
        OOM_PREDICTED,
        trend,
        FORESEEN,
        severity="warning",
        status="resolved",
        resolved_at=ended,
        revision=2,
    )


def _section(page: str, pod: str) -> str:
    found = re.search(rf'<section class="pod-usage"><h3>{pod}</h3>(.*?)</section>', page, re.S)
    assert found is not None, pod
    return found.group(1)


async def test_the_metrics_tab_marks_a_gpus_faults_throttling_and_findings_on_its_pods_charts(
    engine: AsyncEngine,
) -> None:
    uid, story = job_story("llm", workers=2, outcome="Failed", oom_worker=1)
    await store(engine, story)
    await store_usage(engine, uid)
    await fire_gpu_findings(engine, uid)
    async with _client(engine) as client:
        await client.post("/ui/sign-in", data={"token": "token-alice"}, headers=SAME_SITE)
        answer = await client.get(f"/ui/runs/{uid}?tab=metrics")
    assert answer.status_code == 200, answer.text
    page = answer.text
    assert GPU_FAULT.replace("'", "&#39;") in page and "oom-predicted" in page  # the findings, in words

    sick, well = _section(page, "llm-worker-1"), _section(page, "llm-worker-0")
    assert f'class="mark mark-fault" data-at="{XID_AT.isoformat()}" data-label="Xid 79"' in sick
    assert f'class="throttle" data-start="{HOT[0].isoformat()}" data-end="{HOT[1].isoformat()}"' in sick
    assert 'class="mark mark-finding"' in sick and 'data-label="gpu-fault"' in sick
    assert 'data-label="oom-predicted"' in sick
    # the projection: the climb of the readings up to the finding (0.7 GiB a minute) to the limit
    reaches = re.search(r'class="projection" data-reaches="([^"]+)"', sick)
    assert reaches is not None
    expected = FORESEEN + timedelta(seconds=(16 - 13.8) / 0.7 * 60)
    assert abs((datetime.fromisoformat(reaches.group(1)) - expected).total_seconds()) < 1
    # the health table: the Xid with its meaning, the spell, the temperature
    table = re.search(r'<table class="gpu-health">(.*?)</table>', sick, re.S)
    assert table is not None
    assert f"Xid 79 at {XID_AT:%H:%M:%S}: {xid(79).meaning}" in table.group(1)
    assert f"hardware thermal slowdown {HOT[0]:%H:%M:%S}-{HOT[1]:%H:%M:%S}" in table.group(1)
    assert "also (normal): software power cap" in table.group(1)
    assert "83 °C (max 87 °C)" in table.group(1)
    # worker 0: its GPU reported no health series and no finding names it
    assert 'class="mark ' not in well and 'class="throttle"' not in well
    assert "gpu-health" not in well


async def test_the_served_usage_carries_the_gpus_health_series(engine: AsyncEngine) -> None:
    uid, story = job_story("llm", workers=2)
    await store(engine, story)
    await store_usage(engine, uid)
    async with _client(engine) as client:
        run = (
            await client.get(f"/api/v1/runs/{uid}", headers={"Authorization": "Bearer token-alice"})
        ).json()
    gpus = {u["name"]: u["gpus"][0] for u in run["usage"]}
    assert gpus["llm-worker-0"]["health"] is None
    health = gpus["llm-worker-1"]["health"]
    assert [v for _, v in health["xid"]] == [0.0, 0.0, 79.0, 79.0]
    assert health["hostname"] == "gpu-1" and health["temperature_c"][1][1] == 87.0
