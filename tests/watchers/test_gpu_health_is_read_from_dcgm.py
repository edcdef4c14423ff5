"""GPU health from a real Prometheus scraping DCGM-shaped series with dcgm-exporter's labels: the
watcher reads each GPU's Xid, ECC, row-remap, NVLink, throttle and temperature series; the
rules name the worker, node and GPU of a fault during the run and make it the root cause of the
pod's CUDA error, and stay quiet for an Xid on a GPU no worker holds, counters and an Xid left
from before the job, and a throttle of seconds. Once pods end, the final reading still has
every GPU's framebuffer size (it used to be null)."""

from __future__ import annotations

import asyncio
import math
from datetime import UTC, datetime, timedelta

import httpx

from consumers.rules import RuleEngine
from controller.bus.serverconfig import MAX_MSG_BYTES
from controller.contract.events import (
    MAX_CURVE_POINTS,
    MAX_NEIGHBOURS,
    MAX_PODS_PER_READING,
    BusEvent,
    ContainerState,
    JobRef,
    PodObserved,
    PodUsage,
    UsageObserved,
)
from controller.contract.findings import Finding
from controller.contract.settings import UsageSettings
from controller.contract.thresholds import RuleThresholds
from controller.kube.resources import MPI_PODS
from controller.prometheus import Series
from controller.testing.objects import with_container_state
from controller.testing.prometheus import GpuSeries, pci_bus_id
from controller.testing.waits import until
from tests.usage_fixtures import Served, correlator, iso, probe_for, running_job, usage_settings
from watchers.dcgm import HEALTH_METRICS
from watchers.usage import HEALTH_POINTS, _Answers, _Pod
from watchers.watching import WatchChange

MIB = 1024**2
HOT = 0x40  # DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: hardware thermal slowdown
THRESHOLDS = RuleThresholds(gpu_throttle_s=4)


def _pods(readings: list[UsageObserved]) -> dict[str, PodUsage]:
    return {pod.name: pod for reading in readings for pod in reading.pods}


async def _gone(served: Served, query: str) -> None:
    """Wait until Prometheus no longer answers ``query`` (the series went stale)."""

    async def empty() -> bool:
        async with httpx.AsyncClient() as client:
            body = (await client.get(f"{served.prometheus.url}/api/v1/query", params={"query": query})).json()
        return not body["data"]["result"]

    await until(empty, timeout_s=20)


def _failed(event: PodObserved, at: datetime, log: str) -> PodObserved:
    """The worker's pod after its container exited 1 at ``at`` with ``log`` as its tail."""
    return event.model_copy(
        update={
            "resource_version": f"{event.resource_version}9",
            "phase": "Failed",
            "containers": (
                ContainerState(
                    name="worker", state="terminated", reason="Error", exit_code=1, finished_at=at
                ),
            ),
            "log_tail": tuple(log.splitlines()),
            "observed_at": at,
        }
    )


def _findings(engine: RuleEngine, events: list[BusEvent], now: datetime) -> dict[str, Finding]:
    found: dict[str, Finding] = {}
    for event in events:
        for finding in engine.observe(event, now):
            found[finding.rule] = finding
    return found


async def _serve_a_fault(served: Served) -> None:
    """Worker 0's GPU 0 keeps an Xid 13 and 7 DBEs from before the job, its GPU 1 runs hot and
    throttled; worker 1's GPU 0 had 3 DBEs before the job. During the run worker 1's GPU falls
    off the bus (Xid 79) and counts 2 more DBEs, a GPU no pod holds on the same node reports
    Xid 48, and worker 0's GPU 0 throttles for a moment."""
    exporter = served.exporter
    w1 = GpuSeries(util=90, fb_used_mib=50_000, ecc_dbe=3, hostname="gpu-node-1")  # 3 DBEs from before
    stale = GpuSeries(util=90, fb_used_mib=50_000, xid=13, ecc_dbe=7, hostname="gpu-node-0")  # an old Xid
    hot = GpuSeries(
        util=85, fb_used_mib=50_000, throttle_reasons=HOT, temperature_c=91, hostname="gpu-node-0"
    )
    exporter.gpu("team-a", "pi-worker-0", "0", stale)
    exporter.gpu("team-a", "pi-worker-0", "1", hot)
    exporter.gpu("team-a", "pi-worker-1", "0", w1)
    exporter.unassigned_gpu("7", GpuSeries(util=0, fb_used_mib=0, hostname="gpu-node-1"))
    await served.prometheus.scraped('DCGM_FI_DEV_XID_ERRORS{exported_pod="pi-worker-1"}')
    for _ in range(5):  # healthy seconds: the curves' baselines
        await asyncio.sleep(1.0)
    # during the run: worker 1's GPU falls off the bus and counts 2 more DBEs; a GPU no pod
    # holds, on the same node, reports Xid 48; worker 0's GPU 0 throttles for a moment
    exporter.gpu(
        "team-a", "pi-worker-1", "0", GpuSeries(90, 50_000, xid=79, ecc_dbe=5, hostname="gpu-node-1")
    )
    exporter.unassigned_gpu("7", GpuSeries(util=0, fb_used_mib=0, xid=48, ecc_dbe=1, hostname="gpu-node-1"))
    await served.prometheus.scraped('DCGM_FI_DEV_XID_ERRORS{exported_pod="pi-worker-1"} == 79')
    await asyncio.sleep(2.0)
    throttled = 'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{exported_pod="pi-worker-0",gpu="0"}'
    exporter.gpu("team-a", "pi-worker-0", "0", GpuSeries(90, 50_000, xid=13, ecc_dbe=7, throttle_reasons=HOT))
    await served.prometheus.scraped(f"{throttled} == {HOT}")
    exporter.gpu("team-a", "pi-worker-0", "0", stale)
    await served.prometheus.scraped(f"{throttled} == 0")


async def test_a_fault_on_a_workers_gpu_is_named_and_is_the_root_cause_of_its_cuda_error(
    served: Served,
) -> None:
    known = correlator()
    pi = running_job(known, "pi", "team-a", workers=2)  # worker i runs on gpu-node-i
    probe = probe_for(usage_settings(served.prometheus.url), known, [pi])
    await _serve_a_fault(served)

    try:
        readings = await probe.read()
    finally:
        await probe.aclose()

    pods = _pods(readings)
    worker1 = pods["pi-worker-1"].gpus
    assert worker1 is not None and worker1[0].health is not None
    health = worker1[0].health
    assert health.hostname == "gpu-node-1" and health.pci_bus_id == pci_bus_id("0")
    assert health.xid[0][1] == 0 and health.xid[-1][1] == 79
    assert health.ecc_dbe[0][1] == 3 and health.ecc_dbe[-1][1] == 5
    assert [v for _, v in health.xid] == [0, 79, 79]  # kept where it changed, and its ends
    assert [v for _, v in health.throttle_reasons] == [0, 0] and health.temperature_c[-1][1] == 45
    assert {g.gpu for g in pods["pi-worker-0"].gpus or ()} == {"0", "1"}  # the unassigned GPU 7 is no one's

    engine = RuleEngine(THRESHOLDS)
    now = datetime.now(UTC)
    found = _findings(engine, [*pi.events, *readings], now)
    fault = found["gpu-fault"]
    assert fault.severity == "critical"
    assert fault.root_cause.startswith(
        "Worker 1's GPU 0 (GPU-pi-worker-1-0) on node gpu-node-1 reported Xid 79: the GPU has fallen off the bus"
    )
    assert "the job has not failed" in fault.root_cause
    assert "Xid 13" not in str(fault) and "Xid 48" not in str(fault)  # old, and on no worker's GPU
    assert "Worker 0" not in fault.root_cause
    values = {e.field: e.value for e in fault.evidence}
    assert values["spec.nodeName"] == "gpu-node-1"
    assert values["gpus[0].DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"].startswith(
        "2 double-bit (uncorrectable) ECC errors"
    )
    assert fault.remediation[0].startswith("Drain the node and reboot it")
    throttled = found["gpu-throttled"]
    assert throttled.root_cause.startswith(
        "Worker 0's GPU 1 (GPU-pi-worker-0-1) on node gpu-node-0 has been throttled (hardware thermal slowdown) for "
    )
    assert "up to 91 °C" in throttled.root_cause
    assert "GPU 0" not in throttled.root_cause  # its throttle lasted seconds

    # worker 1 then fails with CUDA's words: the hardware is the root cause, the line its evidence
    event = next(e for e in pi.events if isinstance(e, PodObserved) and e.name == "pi-worker-1")
    crash = _failed(event, now + timedelta(seconds=5), "RuntimeError: CUDA error: unspecified launch failure")
    changed = {f.rule: f for f in engine.observe(crash, now + timedelta(seconds=5))}
    assert "gpu-error" not in changed  # explained by the fault before it ever speaks
    fault = changed["gpu-fault"]  # the same fault, told again with what the failure adds
    assert "Xid 79" in fault.root_cause and " before the job failed at " in fault.root_cause
    assert "unspecified launch failure" in fault.root_cause
    assert any(e.field == "log" and "unspecified launch failure" in e.value for e in fault.evidence)
    holding = {f.rule for f in engine.firing(pi.job["metadata"]["uid"])}
    assert "gpu-fault" in holding and not holding & {"gpu-error", "failed"}


async def test_the_final_reading_keeps_the_framebuffer_size_after_the_series_are_gone(served: Served) -> None:
    known = correlator()
    pi = running_job(known, "pi", "team-a", workers=1)
    probe = probe_for(usage_settings(served.prometheus.url), known, [pi])
    served.exporter.gpu("team-a", "pi-worker-0", "0", GpuSeries(util=90, fb_used_mib=40_000))
    await served.prometheus.scraped('DCGM_FI_DEV_FB_FREE{exported_pod="pi-worker-0"}')
    await asyncio.sleep(2.0)
    try:
        running = _pods(await probe.read())["pi-worker-0"]
        assert running.gpus is not None and running.gpus[0].fb_total_bytes == 81_920 * MIB

        served.exporter.drop("team-a", "pi-worker-0")  # the pod ended: DCGM no longer maps the GPU to it
        await _gone(served, 'DCGM_FI_DEV_FB_USED{exported_pod="pi-worker-0"}')
        ended = datetime.fromtimestamp(math.ceil(datetime.now(UTC).timestamp()), UTC)
        obj = pi.pods["pi-worker-0"]
        done = with_container_state(
            obj, {"terminated": {"exitCode": 0, "finishedAt": iso(ended)}}, phase="Succeeded"
        )
        probe.track(WatchChange(MPI_PODS, "MODIFIED", done))
        await until(lambda: datetime.now(UTC) >= ended + timedelta(seconds=1.5), timeout_s=5)
        final = _pods(await probe.read())["pi-worker-0"]
    finally:
        await probe.aclose()

    assert final.final
    assert final.gpus is not None
    assert final.gpus[0].fb_total_bytes == 81_920 * MIB
    assert final.gpus[0].fb_used_max_bytes == 40_000 * MIB


def test_a_reading_of_the_most_pods_whose_gpu_health_keeps_changing_fits_one_bus_message() -> None:
    """256 pods of 8 GPUs, every health curve changing at every step of a long span, each on a
    node crowded with other pods of long names: each curve is merged to HEALTH_POINTS points,
    each pod keeps MAX_NEIGHBOURS other pods, and the reading stays inside the bus's message size."""
    settings = UsageSettings(url="http://prometheus.test:9090", curve_points=MAX_CURVE_POINTS)
    start = 1_800_000_000.0
    series = [
        Series(
            {
                "__name__": metric,
                "gpu": str(gpu),
                "UUID": f"GPU-{gpu:036d}",
                "Hostname": "gpu-node-" + "x" * 40,
                "pci_bus_id": pci_bus_id(str(gpu)),
                "exported_pod": f"pi-worker-{index}",
            },
            tuple((start + 30 * i, float(1_000_000 + i * (gpu + 1))) for i in range(MAX_CURVE_POINTS)),
        )
        for index in range(MAX_PODS_PER_READING)
        for gpu in range(8)
        for metric in HEALTH_METRICS
    ]
    crowd = [
        Series(
            {
                "namespace": "n" * 63,
                "pod": f"{other:02d}" + "p" * 61,
                "node": f"gpu-node-{index}",
                "created_by_kind": "ReplicaSet",
                "created_by_name": "o" * 63,
            },
            ((start, 11.123456 + other), (start + 3600, 11.123456 + other)),
        )
        for index in range(MAX_PODS_PER_READING)
        for other in range(MAX_NEIGHBOURS + 4)
    ]
    answers = _Answers(settings, {"gpu_health": series, "neighbour_cpu": crowd})
    since, until = datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(start + 3600, UTC)
    pods = tuple(
        answers.usage(
            _Pod(
                f"uid-{i}" + "0" * 30,
                "team-a",
                f"pi-worker-{i}",
                "worker",
                i,
                since,
                None,
                None,
                None,
                f"gpu-node-{i}",
            ),
            since,
            until,
            30,
            False,
        )
        for i in range(MAX_PODS_PER_READING)
    )
    reading = UsageObserved(
        job=JobRef(uid="u" * 36, kind="MPIJob", namespace="team-a", name="pi"),
        uid="u" * 36,
        resource_version="1",
        pods=pods,
        observed_at=until,
    )
    health = pods[0].gpus[0].health if pods[0].gpus else None
    assert health is not None and len(health.nvlink_errors) == HEALTH_POINTS
    assert len(pods[0].neighbours) == MAX_NEIGHBOURS
    assert pods[0].neighbours[0].cpu_mean_cores == round(11.123456 + MAX_NEIGHBOURS + 3, 4)  # the most first
    assert len(reading.model_dump_json().encode()) < 0.75 * MAX_MSG_BYTES
