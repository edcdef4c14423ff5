"""A real Prometheus scrapes two runs, each with a worker whose GPUs run below its peers'. The
first straggler's node also runs three pods of another team's job (kube-state-metrics places
them there, cAdvisor and DCGM say what they use, labelled as the real exporters label them);
the second's holds only what must not count: a DaemonSet and a static pod using CPU, the GPU
operator's exporter, an idle notebook, a small web pod and another worker of its own run. The
watcher's readings make the rules name the first straggler's co-tenant as its likely reason,
and give the second none."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from consumers.rules import RuleEngine
from controller.contract.events import BusEvent
from controller.contract.findings import Finding
from controller.contract.thresholds import RuleThresholds
from controller.testing.prometheus import GpuSeries, UsageExporter
from tests.usage_fixtures import Run, Served, correlator, probe_for, running_job, served, usage_settings  # noqa: F401

SERVED_S = 14
THRESHOLDS = RuleThresholds(straggler_s=10, gpu_idle_s=3)


def _workers(exporter: UsageExporter, run: Run, nodes: list[str], utils: list[float]) -> None:
    """Place the run's workers on ``nodes`` (as the watcher and kube-state-metrics see them), each
    with two GPUs at ``utils``."""
    namespace, job = run.job["metadata"]["namespace"], run.job["metadata"]["name"]
    for index, (node, util) in enumerate(zip(nodes, utils, strict=True)):
        name = f"{job}-worker-{index}"
        run.pods[name]["spec"]["nodeName"] = node
        exporter.place(namespace, name, node, "MPIJob", job)
        exporter.cpu(namespace, name, 6.0)
        for gpu in ("0", "1"):
            exporter.gpu(namespace, name, gpu, GpuSeries(util=util, fb_used_mib=40_000, hostname=node))


async def test_the_straggler_names_the_other_job_on_its_node_and_not_what_every_node_runs(
    served: Served,  # noqa: F811
) -> None:
    exporter, prometheus = served.exporter, served.prometheus
    known = correlator()
    shared = running_job(known, "pi", "team-a", workers=4)
    quiet = running_job(known, "lm", "team-c", workers=4)
    _workers(exporter, shared, [f"gpu-node-{i}" for i in range(4)], [92.0, 90.0, 45.0, 91.0])
    _workers(
        exporter, quiet, ["gpu-node-4", "gpu-node-5", "gpu-node-6", "gpu-node-5"], [92.0, 45.0, 93.0, 90.0]
    )

    for index, cores in enumerate([4.0, 4.5, 3.0]):  # another team's job on pi's straggler's node
        name = f"bert-large-worker-{index}"
        exporter.place("team-b", name, "gpu-node-2", "MPIJob", "bert-large")
        exporter.cpu("team-b", name, cores)
    for gpu in ("2", "3"):
        exporter.gpu(
            "team-b",
            "bert-large-worker-0",
            gpu,
            GpuSeries(util=95, fb_used_mib=60_000, hostname="gpu-node-2"),
        )
    for node in ("gpu-node-2", "gpu-node-5"):  # what every node runs
        exporter.place("monitoring", f"node-exporter-{node}", node, "DaemonSet", "node-exporter")
        exporter.cpu("monitoring", f"node-exporter-{node}", 3.0)
        exporter.place("kube-system", f"kube-proxy-{node}", node, "Node", node)
        exporter.cpu("kube-system", f"kube-proxy-{node}", 2.5)
        exporter.place(
            "gpu-operator", f"nvidia-dcgm-exporter-{node}", node, "DaemonSet", "nvidia-dcgm-exporter"
        )
        exporter.cpu("gpu-operator", f"nvidia-dcgm-exporter-{node}", 2.0)
    exporter.place("team-d", "notebook-0", "gpu-node-5", "StatefulSet", "notebook")  # idle
    exporter.cpu("team-d", "notebook-0", 0.1)
    exporter.gpu("team-d", "notebook-0", "4", GpuSeries(util=0, fb_used_mib=500, hostname="gpu-node-5"))
    exporter.place("team-e", "web-6b7c9", "gpu-node-5")  # small, and nothing owns it
    exporter.cpu("team-e", "web-6b7c9", 0.8)

    await prometheus.scraped('kube_pod_info{pod="web-6b7c9"}')
    probe = probe_for(usage_settings(prometheus.url, curve_points=120), known, [shared, quiet])
    await asyncio.sleep(SERVED_S)  # the curves must span the straggler's window
    try:
        readings = await probe.read()
    finally:
        await probe.aclose()

    straggler = next(p for r in readings for p in r.pods if p.name == "pi-worker-2")
    bert = {n.pod: n for n in straggler.neighbours if n.namespace == "team-b"}
    assert set(bert) == {"bert-large-worker-0", "bert-large-worker-1", "bert-large-worker-2"}
    assert bert["bert-large-worker-0"].gpus == 2 and bert["bert-large-worker-0"].gpu_util_mean_pct == 95.0
    assert bert["bert-large-worker-1"].owner_kind == "MPIJob"
    assert 4.0 <= (bert["bert-large-worker-1"].cpu_mean_cores or 0) <= 5.0  # 4.5 cores, as rated
    assert all(n.pod != "pi-worker-2" for n in straggler.neighbours)  # not its own neighbour
    web = next(
        n
        for r in readings
        for p in r.pods
        if p.name == "lm-worker-1"
        for n in p.neighbours
        if n.pod == "web-6b7c9"
    )
    assert web.owner_kind is None and web.owner_name is None  # kube-state-metrics' <none>

    found = _findings([*shared.events, *quiet.events, *readings])
    named = found[("pi", "straggler")].root_cause
    assert named.startswith("Worker 2 is a straggler: its GPUs have run at 45 % while its peers'")
    assert "; its node gpu-node-2 also runs 3 pods of team-b/bert-large (MPIJob), using 11." in named
    assert named.endswith(" CPU cores and 2 GPUs at 95 %")
    unshared = found[("lm", "straggler")].root_cause
    assert unshared.startswith("Worker 1 is a straggler: its GPUs have run at 45 % while its peers'")
    assert "also runs" not in unshared


def _findings(events: list[BusEvent]) -> dict[tuple[str, str], Finding]:
    """The findings of both runs, by job name and rule."""
    rules = RuleEngine(THRESHOLDS)
    now = datetime.now(UTC)
    return {(f.job.name, f.rule): f for event in events for f in rules.observe(event, now)}
