"""Cold start and restart on a big cluster: how soon the controller is caught up, and how late failures are.

A simulated cluster of ``--jobs`` running MPIJobs x ``--workers`` running workers + launcher is
in place before the controller starts. The controller runs as deployed, one process per part
(``watch``, ``consume --only history``, ``consume --only rules``) on embedded PostgreSQL and
NATS. Printed:

- ``relist``: messages the relist put on the JOBS stream, and at what rate;
- ``caught_up_s``: from the start until the history and every rules partition have consumed
  everything;
- ``cold_oom_latency_s``: one worker in each of ``--failures`` jobs is OOM-killed as soon as
  the relist's first message is on the stream, while the rest is still being published: from
  each kill to its ``oom`` finding on the FINDINGS stream, p50/p99/max;
- ``restart``: every process stopped (SIGTERM) and started again on the unchanged cluster:
  messages the new relist put on JOBS (objects already published at that version are not
  published again), then the latency of ``--failures`` more OOM kills right after the start;
- ``peak_rss_mib`` per process and ``watcher_bytes_per_pod``.

    .venv/bin/python -m benchmarks.coldstart [--jobs 1000] [--workers 16] [--failures 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.msg import Msg

from benchmarks.harness import report
from controller.bus.streams import ensure_streams
from controller.cli.embedded import EmbeddedServices
from controller.contract.findings import parse_finding
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology
from controller.store import migrate
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until

PARTS = {
    "watcher": ["watch"],
    "history": ["consume", "--only", "history"],
    "rules": ["consume", "--only", "rules"],
}
Obj = dict[str, Any]


def populate(sim: SimCluster, jobs: int, workers: int) -> dict[str, Obj]:
    """Running jobs with running pods; returns worker 1 of each job, by job name."""
    victims: dict[str, Obj] = {}
    running = {"running": {"startedAt": "2026-11-20T10:00:20Z"}}
    for j in range(jobs):
        job = k.with_conditions(
            k.mpijob(f"job-{j}", workers=workers), ("Running", "MPIJobRunning", "2026-11-20T10:00:21Z")
        )
        sim.create(job)
        for role, index in [("launcher", None), *(("worker", i) for i in range(workers))]:
            pod = k.with_container_state(
                k.pod(job, role, index, node=f"node-{j % 64}"), running, phase="Running", ready=True
            )
            sim.create(pod)
            if index == 1:
                victims[f"job-{j}"] = pod
    return victims


def oom_kill(sim: SimCluster, pod: Obj) -> None:
    sim.update(
        k.with_container_state(
            pod,
            {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-11-20T11:00:00Z"}},
            phase="Failed",
        )
    )


class Controller:
    """The three processes, with the environment of one installation."""

    def __init__(self, env: dict[str, str], workdir: Path) -> None:
        self.env, self.workdir = env, workdir
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        for name, args in PARTS.items():
            with (self.workdir / f"{name}.log").open("ab") as log:
                self.processes[name] = subprocess.Popen(
                    [sys.executable, "-m", "controller.cli", *args],
                    env=self.env,
                    cwd=self.workdir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )

    def peak_rss_mib(self) -> dict[str, float]:
        peaks: dict[str, float] = {}
        for name, process in self.processes.items():
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks[name] = round(int(line.split()[1]) / 1024, 1)
        return peaks

    def stop(self) -> None:
        for process in self.processes.values():
            process.send_signal(signal.SIGTERM)
        for process in self.processes.values():
            process.wait(60)


class Findings:
    """Arrival time of the first firing ``oom`` finding of each job, from FINDINGS."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}

    async def on(self, msg: Msg) -> None:
        finding = parse_finding(msg.data)
        if finding.rule == "oom" and finding.status == "firing":
            self.arrived.setdefault(finding.job.name, time.monotonic())


async def relist_rate(messages: Callable[[], Awaitable[int]], first: float) -> dict[str, int]:
    """Watch the JOBS stream grow until it has been still for 3 s: how much the relist put
    there, and how fast from its first message (at ``first``)."""
    last_count, last_growth = 0, time.monotonic()
    while time.monotonic() - last_growth < 3:
        count = await messages()
        if count != last_count:
            last_count, last_growth = count, time.monotonic()
        await asyncio.sleep(0.2)
    return {"messages": last_count, "per_s": round(last_count / max(last_growth - first, 1e-3))}


def percentiles(injected: dict[str, float], arrived: dict[str, float]) -> dict[str, float]:
    """p50, p99 and max of the time from each injection to its finding."""
    waits = sorted(arrived[name] - at for name, at in injected.items())
    return {
        "p50": round(statistics.median(waits), 3),
        "p99": round(waits[min(len(waits) - 1, int(len(waits) * 0.99))], 3),
        "max": round(waits[-1], 3),
    }


async def measure(jobs: int, workers: int, failures: int) -> dict[str, Any]:
    topology = Topology("cold")
    with tempfile.TemporaryDirectory(prefix="mpijc-coldstart-") as tmp, SimCluster() as sim:
        workdir = Path(tmp)
        victims = populate(sim, jobs, workers)
        pods = jobs * (workers + 1)
        with EmbeddedServices(workdir, free_port(), free_port(), None, None) as services:
            await migrate.upgrade_async(services.database_url)
            nc = await nats.connect(services.nats_url)
            js = nc.jetstream()
            await ensure_streams(js, topology, NatsSettings())
            findings = Findings()
            await nc.subscribe(topology.wildcard("findings"), cb=findings.on)
            env = {
                **os.environ,
                "MPIJC_DATABASE__URL": services.database_url,
                "MPIJC_NATS__URL": services.nats_url,
                "MPIJC_NATS__PREFIX": topology.prefix,
                "MPIJC_KUBE__KUBECONFIG": str(sim.kubeconfig(workdir / "kubeconfig")),
                "MPIJC_API__METRICS_PORT": "0",
                "MPIJC_LOG_LEVEL": "INFO",
            }
            stream = topology.stream("jobs")

            async def messages() -> int:
                return int((await js.stream_info(stream)).state.messages)

            async def caught_up() -> bool:
                infos = [
                    i for i in await js.consumers_info(stream) if i.name and not i.name.endswith("_urgent")
                ]
                durables = [
                    i for i in infos if i.name in (topology.durable("history"),) or "_rules_p" in i.name
                ]
                return len(durables) >= 2 and all(
                    i.num_pending == 0 and i.num_ack_pending == 0 for i in durables
                )

            async def inject(names: list[str]) -> dict[str, float]:
                at = {}
                for name in names:
                    oom_kill(sim, victims[name])
                    at[name] = time.monotonic()
                return at

            controller = Controller(env, workdir)
            started = time.monotonic()
            controller.start()
            await until(messages, 120, interval_s=0.05)  # the relist is under way
            first = time.monotonic()
            cold = await inject([f"job-{j}" for j in range(failures)])
            relist = await relist_rate(messages, first)
            await until(caught_up, 600, interval_s=0.2)
            caught_up_s = round(time.monotonic() - started, 2)
            await until(lambda: all(n in findings.arrived for n in cold), 120, interval_s=0.05)
            cold_latency = percentiles(cold, findings.arrived)
            rss = controller.peak_rss_mib()
            controller.stop()

            before = await messages()
            controller = Controller(env, workdir)
            controller.start()
            await asyncio.sleep(1.0)  # the warm start is under way
            warm = await inject([f"job-{j}" for j in range(failures, 2 * failures)])
            await until(lambda: all(n in findings.arrived for n in warm), 120, interval_s=0.05)
            await asyncio.sleep(3)
            restart = {
                "new_messages": await messages() - before - failures,
                "oom_latency_s": percentiles(warm, findings.arrived),
            }
            controller.stop()
            await nc.close()
    return {
        "jobs": jobs,
        "workers": workers,
        "pods": pods,
        "relist": relist,
        "caught_up_s": caught_up_s,
        "cold_oom_latency_s": cold_latency,
        "restart": restart,
        "peak_rss_mib": rss,
        "watcher_bytes_per_pod": round(rss["watcher"] * 1024 * 1024 / pods),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--failures", type=int, default=20)
    args = parser.parse_args()
    report("coldstart", asyncio.run(measure(args.jobs, args.workers, args.failures)))
