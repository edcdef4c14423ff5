"""The watcher probes running launchers' logs (``sinceSeconds``, never a stream); the rules tell a
quiet-but-working job from a hung one by it: no finding while lines keep coming, "No progress"
once they stop. Real client → simulated API server → NATS → rules consumer, short thresholds."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from nats.js import JetStreamContext

from controller.contract.events import LogProbed, parse_event
from controller.contract.findings import Finding, parse_finding
from controller.contract.thresholds import RuleThresholds
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.pipeline_fixtures import EndToEnd


def running_job(sim: SimCluster) -> k.Obj:
    job = k.with_conditions(
        k.mpijob("quiet", workers=2), ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z")
    )
    sim.create(job)
    for pod in [
        k.pod(job, "launcher", node="cpu-1"),
        *(k.pod(job, "worker", i, node=f"gpu-{i}") for i in (0, 1)),
    ]:
        sim.create(
            k.with_container_state(
                pod, {"running": {"startedAt": "2026-11-20T10:01:00Z"}}, phase="Running", ready=True
            )
        )
    return job


@contextlib.asynccontextmanager
async def writing_log(sim: SimCluster, every_s: float) -> AsyncIterator[None]:
    async def write() -> None:
        step = 0
        while True:
            step += 1
            sim.append_log("team-a", "quiet-launcher-x7k2p", "launcher", f"step {step} loss 1.{step}\n")
            await asyncio.sleep(every_s)

    task = asyncio.create_task(write())
    try:
        yield
    finally:
        task.cancel()


Subscription = JetStreamContext.PullSubscription


async def probed_fast(end_to_end: EndToEnd, job: str) -> tuple[Subscription, Subscription]:
    """Probes every 0.3 s, rules ticking every 0.1 s and calling a run hung after 2 s without
    progress; subscriptions to the findings and to team-a's ``job``'s probes."""
    end_to_end.settings.watcher.progress_probe_s = 0.3
    end_to_end.settings.consumer.rules_tick_s = 0.1
    end_to_end.settings.rules = RuleThresholds(hang_progress_s=2.0)
    topology = end_to_end.topology
    findings = await end_to_end.js.pull_subscribe(
        topology.wildcard("findings"), stream=topology.stream("findings")
    )
    probes = await end_to_end.js.pull_subscribe(
        f"{topology.prefix}.jobs.team-a.{job}.log", stream=topology.stream("jobs")
    )
    return findings, probes


async def test_no_progress_fires_only_when_the_launcher_stops_writing(end_to_end: EndToEnd) -> None:
    findings, probes = await probed_fast(end_to_end, "quiet")

    async def new_findings() -> list[Finding]:
        try:
            return [parse_finding(m.data) for m in await findings.fetch(10, timeout=0.2)]
        except TimeoutError:
            return []

    async with end_to_end.running():
        running_job(end_to_end.sim)
        async with writing_log(end_to_end.sim, every_s=0.1):
            await asyncio.sleep(3.0)  # longer than the 2 s threshold, with output all along
            assert [f.rule for f in await new_findings()] == []
        probe = parse_event((await probes.fetch(1, timeout=5))[0].data)
        assert isinstance(probe, LogProbed) and probe.role == "launcher" and probe.new_lines > 0
        assert probe.tail[-1].startswith("step ")

        fired: list[Finding] = []

        async def hang_reported() -> bool:
            fired.extend(await new_findings())
            return any(f.rule == "hang-progress" for f in fired)

        for _ in range(100):
            if await hang_reported():
                break
        hang = next(f for f in fired if f.rule == "hang-progress")
    assert hang.status == "firing" and hang.root_cause.startswith("No progress for")
    assert hang.job.name == "quiet"


async def test_a_launcherless_job_is_probed_through_its_master(end_to_end: EndToEnd) -> None:
    """A PyTorchJob has no launcher: its Master-0 (rank 0 under torchrun) is probed instead, and
    the rules call it hung once Master-0 stops writing."""
    findings, probes = await probed_fast(end_to_end, "bert")
    job = k.with_conditions(
        k.training_job("PyTorchJob", "bert"), ("Running", "PyTorchJobRunning", "2026-11-20T10:01:00Z")
    )
    end_to_end.sim.create(job)
    pods = [k.replica_pod(job, "Master", 0), *(k.replica_pod(job, "Worker", i) for i in (0, 1))]
    for pod in pods:
        end_to_end.sim.create(
            k.with_container_state(
                pod, {"running": {"startedAt": "2026-11-20T10:01:00Z"}}, phase="Running", ready=True
            )
        )

    async def write() -> None:
        step = 0
        while True:
            step += 1
            end_to_end.sim.append_log("team-a", "bert-master-0", "pytorch", f"step {step} loss 0.{step}\n")
            await asyncio.sleep(0.1)

    async with end_to_end.running():
        writer = asyncio.create_task(write())
        try:
            probed: list[LogProbed] = []
            for _ in range(50):
                probed += [
                    e
                    for m in await probes.fetch(10, timeout=5)
                    if isinstance(e := parse_event(m.data), LogProbed)
                ]
                if any(p.new_lines > 0 for p in probed):
                    break
        finally:
            writer.cancel()
        master = next(p for p in probed if p.new_lines > 0)
        assert (master.name, master.role, master.replica, master.index) == (
            "bert-master-0",
            "worker",
            "Master",
            0,
        )
        assert {p.name for p in probed} <= {
            "bert-master-0",
            "bert-worker-0",
        }  # rank 0 of each replica type, no more

        hang: Finding | None = None
        for _ in range(100):
            try:
                fetched = [parse_finding(m.data) for m in await findings.fetch(10, timeout=0.2)]
            except TimeoutError:
                continue
            hang = next((f for f in fetched if f.rule == "hang-progress"), hang)
            if hang is not None:
                break
    assert (
        hang is not None and hang.job.kind == "PyTorchJob" and hang.root_cause.startswith("No progress for")
    )
