"""Cold start and restart on a big cluster: how soon the controller is caught up, and how late failures are.

A simulated cluster of ``--jobs`` running MPIJobs x ``--workers`` running workers + launcher is
in place before the controller starts. The controller runs as deployed, one process per part
(``watch``, ``consume --only history``, ``consume --only rules``, ``api``) on embedded PostgreSQL
and NATS. Every failure latency is measured twice: ``bus``, until the finding is on the FINDINGS
stream, and ``api``, until it is readable through the API (``GET /api/v1/runs/{uid}/findings``
lists it, polled every 50 ms), which is what a user waits for. Printed:

- ``relist``: messages the relist put on the JOBS stream, and at what rate;
- ``caught_up_s``: from the start until the history and every rules partition have consumed
  everything;
- ``cold_oom_latency_s``: one worker in each of ``--failures`` jobs is OOM-killed as soon as
  the relist's first message is on the stream, while the rest is still being published: from
  each kill to its ``oom`` finding, p50/p99/max;
- ``steady_oom_latency_s``: once caught up, ``--failures`` more OOM kills at once, the same way;
- ``history``: before the restart, ``--history`` past runs go through the cluster while the
  controller watches — created, running, one in five OOM-killed, finished, deleted with their
  pods — so the restart has a long stream behind it (what a week of churn leaves: JOBS and
  FINDINGS messages, finished runs the rules forgot, deleted objects the watcher published);
- ``restart``: every process stopped (SIGTERM) and started again on the unchanged cluster:
  messages the new relist put on JOBS (objects already published at that version are not
  published again), then the latency of ``--failures`` more OOM kills 1, 3 and 5 s after the
  start, each batch at its time whatever the earlier ones still wait for (how soon findings are
  prompt again), and what the restart read of the history: events
  the rules replayed and findings they read (from their warm-start log lines), published
  versions the watcher loaded;
- ``peak_rss_mib`` per process and ``watcher_bytes_per_pod``.

    .venv/bin/python -m benchmarks.coldstart [--jobs 1000] [--workers 16] [--failures 20] [--history 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import nats
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from benchmarks.harness import profiled, report
from controller.bus.streams import ensure_streams
from controller.bus.versions import BUCKET
from controller.cli.embedded import EmbeddedServices, die_with_this_process
from controller.contract.findings import parse_finding
from controller.contract.settings import ConsumerSettings, NatsSettings
from controller.contract.subjects import HISTORY_DURABLE, RULES_DURABLE, Topology
from controller.store import migrate
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until

PARTS = {
    "watcher": ["watch"],
    "history": ["consume", "--only", "history"],
    "rules": ["consume", "--only", "rules"],
    "api": ["api"],
}
Obj = dict[str, Any]
RESTART_DELAYS_S = (1.0, 3.0, 5.0)
"""After a restart, ``--failures`` OOM kills are injected this long after the processes start, each."""


def populate(sim: SimCluster, jobs: int, workers: int) -> tuple[dict[str, Obj], dict[str, str]]:
    """Running jobs with running pods; returns worker 1 of each job and each job's uid, by job name."""
    victims: dict[str, Obj] = {}
    uids: dict[str, str] = {}
    running = {"running": {"startedAt": "2026-11-20T10:00:20Z"}}
    for j in range(jobs):
        job = k.with_conditions(
            k.mpijob(f"job-{j}", workers=workers), ("Running", "MPIJobRunning", "2026-11-20T10:00:21Z")
        )
        uids[f"job-{j}"] = sim.create(job)["metadata"]["uid"]
        for role, index in [("launcher", None), *(("worker", i) for i in range(workers))]:
            pod = k.with_container_state(
                k.pod(job, role, index, node=f"node-{j % 64}"), running, phase="Running", ready=True
            )
            sim.create(pod)
            if index == 1:
                victims[f"job-{j}"] = pod
    return victims, uids


def oom_kill(sim: SimCluster, pod: Obj) -> None:
    sim.update(k.oom_killed(pod, finished_at="2026-11-20T11:00:00Z"))


def churn(sim: SimCluster, runs: int, workers: int) -> int:
    """``runs`` past runs through the cluster: created, running, one in five OOM-killed, finished,
    deleted with their pods. Returns how many objects were deleted."""
    running = {"running": {"startedAt": "2026-11-19T10:00:20Z"}}
    deleted = 0
    for n in range(runs):
        job = sim.create(k.mpijob(f"past-{n}", workers=workers))
        pods = [
            sim.create(k.pod(job, role, index, node=f"node-{n % 64}"))
            for role, index in [("launcher", None), *(("worker", i) for i in range(workers))]
        ]
        job = sim.update(k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-19T10:00:21Z")))
        pods = [sim.update(k.with_container_state(p, running, phase="Running", ready=True)) for p in pods]
        if n % 5 == 0:
            oom_kill(sim, pods[2])
            end = ("Failed", "MPIJobFailed", "2026-11-19T11:00:01Z")
        else:
            end = ("Succeeded", "MPIJobSucceeded", "2026-11-19T11:00:01Z")
        job = sim.update(k.with_conditions(job, end))
        for obj in [*pods, job]:
            sim.delete(obj)
        deleted += len(pods) + 1
    return deleted


class Controller:
    """The three processes, with the environment of one installation."""

    def __init__(self, env: dict[str, str], workdir: Path, run: str) -> None:
        self.env, self.workdir, self.run = env, workdir, run
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        for name, args in PARTS.items():
            with (self.workdir / f"{name}.log").open("ab") as log:
                self.processes[name] = subprocess.Popen(
                    [sys.executable, *profiled(f"{self.run}.{name}"), "-m", "controller.cli", *args],
                    env=self.env,
                    cwd=self.workdir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=die_with_this_process(signal.SIGTERM),  # noqa: PLW1509 - only prctl
                )

    def log_size(self, name: str) -> int:
        path = self.workdir / f"{name}.log"
        return path.stat().st_size if path.exists() else 0

    def log_since(self, name: str, offset: int) -> str:
        with (self.workdir / f"{name}.log").open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def peak_rss_mib(self) -> dict[str, float]:
        peaks: dict[str, float] = {}
        for name, process in self.processes.items():
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peaks[name] = round(int(line.split()[1]) / 1024, 1)
        return peaks

    def stop(self, grace_s: float = 60) -> None:
        """SIGTERM each, as Kubernetes stops a pod; one still running after ``grace_s`` is killed
        and named, with the end of its log (a process must stop when told)."""
        for process in self.processes.values():
            process.send_signal(signal.SIGTERM)
        stuck = []
        for name, process in self.processes.items():
            try:
                process.wait(grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                tail = (self.workdir / f"{name}.log").read_text(errors="replace").splitlines()[-20:]
                stuck.append(f"{name} did not stop on SIGTERM within {grace_s:g} s:\n" + "\n".join(tail))
        if stuck:
            raise RuntimeError("\n".join(stuck))


class Findings:
    """Arrival time of the first firing ``oom`` finding of each job, from FINDINGS."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}

    async def on(self, msg: Msg) -> None:
        finding = parse_finding(msg.data)
        if finding.rule == "oom" and finding.status == "firing":
            self.arrived.setdefault(finding.job.name, time.monotonic())


class ApiFindings:
    """When the first firing ``oom`` finding of each job became readable through the API."""

    POLL_S = 0.05

    def __init__(self, base_url: str, uids: dict[str, str]) -> None:
        self.base_url, self.uids = base_url, uids

    async def watch(self, names: list[str], timeout_s: float = 120) -> dict[str, float]:
        """Poll ``GET /api/v1/runs/{uid}/findings`` of each job until it lists the finding."""
        async with httpx.AsyncClient(base_url=self.base_url, timeout=5) as client:

            async def arrival(name: str) -> float:
                while True:
                    try:
                        response = await client.get(f"/api/v1/runs/{self.uids[name]}/findings")
                        items = response.json()["items"] if response.status_code == 200 else []
                        if any(f["rule"] == "oom" and f["status"] == "firing" for f in items):
                            return time.monotonic()
                    except httpx.TransportError:
                        pass  # the API is (re)starting
                    await asyncio.sleep(self.POLL_S)

            async with asyncio.timeout(timeout_s):
                times = await asyncio.gather(*(arrival(name) for name in names))
        return dict(zip(names, times, strict=True))


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


WARM_START = re.compile(
    r"rules warm start of partition \d+: (?P<runs>\d+) runs from the snapshot .*?, (?P<replayed>\d+) events "
    r"replayed .*?, (?P<findings>\d+) findings read from the bus, .*?, (?P<seconds>[\d.]+)s"
)
VERSIONS = re.compile(r"(?P<versions>\d+) published versions loaded in (?P<seconds>[\d.]+)s")


def read_of_history(controller: Controller, offsets: dict[str, int]) -> dict[str, Any]:
    """What the restarted processes read of the history, from their logs: per rules partition
    the runs its snapshot held, the JOBS events it replayed and the FINDINGS changes it read,
    and the published versions the watcher loaded."""
    warm = [m.groupdict() for m in WARM_START.finditer(controller.log_since("rules", offsets["rules"]))]
    loaded = VERSIONS.search(controller.log_since("watcher", offsets["watcher"]))
    return {
        "rules_warm_starts": [
            {key: float(value) if key == "seconds" else int(value) for key, value in w.items()} for w in warm
        ],
        "watcher_versions_loaded": int(loaded["versions"]) if loaded else None,
        "watcher_versions_load_s": float(loaded["seconds"]) if loaded else None,
    }


def percentiles(injected: dict[str, float], arrived: dict[str, float]) -> dict[str, float]:
    """p50, p99 and max of the time from each injection to its finding."""
    waits = sorted(arrived[name] - at for name, at in injected.items())
    return {
        "p50": round(statistics.median(waits), 3),
        "p99": round(waits[min(len(waits) - 1, int(len(waits) * 0.99))], 3),
        "max": round(waits[-1], 3),
    }


@dataclass
class Installation:
    """One simulated cluster and one installation of the controller on the embedded services."""

    sim: SimCluster
    js: JetStreamContext
    topology: Topology
    env: dict[str, str]
    workdir: Path
    victims: dict[str, Obj]
    findings: Findings
    api: ApiFindings

    async def messages(self) -> int:
        return int((await self.js.stream_info(self.topology.stream("jobs"))).state.messages)

    async def has_messages(self) -> bool:
        return await self.messages() > 0

    def inject(self, names: list[str]) -> dict[str, float]:
        """OOM-kill worker 1 of each job named; when each was killed."""
        at = {}
        for name in names:
            oom_kill(self.sim, self.victims[name])
            at[name] = time.monotonic()
        return at

    async def found(self, injected: dict[str, float]) -> dict[str, dict[str, float]]:
        """Wait for the ``oom`` finding of every kill on the bus and through the API; their latencies."""
        through_api = asyncio.create_task(self.api.watch(list(injected)))
        await until(lambda: all(n in self.findings.arrived for n in injected), 120, interval_s=0.05)
        return {
            "bus": percentiles(injected, self.findings.arrived),
            "api": percentiles(injected, await through_api),
        }

    @property
    def durables(self) -> set[str]:
        """The durables on JOBS that must have consumed everything: history and each rules partition."""
        return {self.topology.durable(HISTORY_DURABLE)} | {
            self.topology.partition_durable(RULES_DURABLE, n)
            for n in range(ConsumerSettings().rules_partitions)
        }

    async def stream_size(self, stream: str) -> int:
        return int((await self.js.stream_info(stream)).state.messages)

    async def consumed(self) -> bool:
        """Whether history and every rules partition have consumed the whole JOBS stream."""
        infos = await self.js.consumers_info(self.topology.stream("jobs"))
        idle = {i.name for i in infos if i.num_pending == 0 and i.num_ack_pending == 0}
        return self.durables <= idle

    async def cold_start(self, failures: int, history: int, workers: int) -> dict[str, Any]:
        """Start on the populated cluster with nothing published yet; kill workers as the relist
        begins; then put ``history`` past runs through the cluster."""
        caught: dict[str, float] = {}
        relisted = asyncio.Event()
        durables = self.durables

        async def caught_up() -> bool:
            """Whether history and every rules partition consumed the whole relist (noting when
            each last became idle: it may be idle for a while between batches)."""
            for info in await self.js.consumers_info(self.topology.stream("jobs")):
                if info.name in durables and info.num_pending == 0 and info.num_ack_pending == 0:
                    caught.setdefault(info.name, round(time.monotonic() - started, 2))
                elif info.name in durables:
                    caught.pop(info.name, None)
            return relisted.is_set() and caught.keys() == durables

        controller = Controller(self.env, self.workdir, "cold")
        started = time.monotonic()
        controller.start()
        try:
            await until(self.has_messages, 120, interval_s=0.05)  # the relist is under way
            first = time.monotonic()
            cold = self.inject([f"job-{j}" for j in range(failures)])
            catching_up = asyncio.create_task(until(caught_up, 600, interval_s=0.2))
            relist = {"first_message_s": round(first - started, 2), **await relist_rate(self.messages, first)}
            relisted.set()
            await catching_up
            latency = await self.found(cold)
            steady = await self.found(self.inject([f"job-{j}" for j in range(4 * failures, 5 * failures)]))
            result = {
                "relist": relist,
                "caught_up_s": max(caught.values()),
                "caught_up_s_by_durable": dict(caught),
                "cold_oom_latency_s": latency,
                "steady_oom_latency_s": steady,
                "peak_rss_mib": controller.peak_rss_mib(),
            }
            if history:
                result["history"] = {
                    **await self.churn(history, workers),
                    "peak_rss_mib": controller.peak_rss_mib(),
                }
            return result
        finally:
            controller.stop()

    async def churn(self, runs: int, workers: int) -> dict[str, Any]:
        """Past runs through the cluster while the controller watches, until all is consumed."""
        started = time.monotonic()
        deleted = await asyncio.to_thread(churn, self.sim, runs, workers)
        await relist_rate(self.messages, started)  # until the watcher has published all of it
        await until(self.consumed, 600, interval_s=0.2)
        return {
            "runs": runs,
            "objects_deleted": deleted,
            "seconds": round(time.monotonic() - started, 1),
            "jobs_messages": await self.stream_size(self.topology.stream("jobs")),
            "findings_messages": await self.stream_size(self.topology.stream("findings")),
            "published_versions_kept": await self.stream_size(f"KV_{self.topology.bucket(BUCKET)}"),
        }

    async def restart(self, failures: int) -> dict[str, Any]:
        """Start again on the unchanged cluster; kill workers 1, 3 and 5 s after the start."""
        before = await self.messages()
        controller = Controller(self.env, self.workdir, "restart")
        logs = {name: controller.log_size(name) for name in PARTS}
        restarted = time.monotonic()
        controller.start()
        try:

            async def kill_after(n: int, delay: float) -> dict[str, Any]:
                """Kill the n-th batch ``delay`` after the start, whatever the batches before it wait."""
                await asyncio.sleep(max(0.0, restarted + delay - time.monotonic()))
                injected = self.inject([f"job-{j}" for j in range(n * failures, (n + 1) * failures)])
                at = round(min(injected.values()) - restarted, 2)
                return {"injected_s_after_start": at, **await self.found(injected)}

            batches = await asyncio.gather(
                *(kill_after(n, delay) for n, delay in enumerate(RESTART_DELAYS_S, start=1))
            )
            latency = {
                f"kill_{delay:g}s_after_start": b for delay, b in zip(RESTART_DELAYS_S, batches, strict=True)
            }
            await asyncio.sleep(3)
            return {
                "new_messages": await self.messages() - before - failures * len(RESTART_DELAYS_S),
                "oom_latency_s": latency,
                **read_of_history(controller, logs),
            }
        finally:
            controller.stop()


async def measure(
    jobs: int, workers: int, failures: int, history: int, logs: Path | None = None
) -> dict[str, Any]:
    topology = Topology("cold")
    with tempfile.TemporaryDirectory(prefix="mpijc-coldstart-") as tmp, SimCluster() as sim:
        workdir = Path(tmp)
        victims, uids = populate(sim, jobs, workers)
        # no NATS users: the bench reads the findings itself (up_restart measures `up` with them)
        with EmbeddedServices(workdir, free_port(), free_port(), None, None, nats_users=False) as services:
            await migrate.upgrade_async(services.database_url)
            nc = await nats.connect(services.nats_url)
            js = nc.jetstream()
            await ensure_streams(js, topology, NatsSettings())
            findings = Findings()
            api_port = free_port()
            await nc.subscribe(topology.wildcard("findings"), cb=findings.on)
            env = {
                **os.environ,
                "MPIJC_DATABASE__URL": services.database_url,
                "MPIJC_DATABASE__SINGLE_ROLE": "true",
                "MPIJC_NATS__URL": services.nats_url,
                "MPIJC_NATS__PREFIX": topology.prefix,
                "MPIJC_KUBE__KUBECONFIG": str(sim.kubeconfig(workdir / "kubeconfig")),
                "MPIJC_METRICS__PORT": "0",
                "MPIJC_API__PORT": str(api_port),
                "MPIJC_API__AUTH": "off",  # one local reader; auth is measured in benchmarks.api
                "MPIJC_API__RATE_PER_S": "0",
                "MPIJC_LOG_LEVEL": "INFO",
            }
            api = ApiFindings(f"http://127.0.0.1:{api_port}", uids)
            installation = Installation(sim, js, topology, env, workdir, victims, findings, api)
            cold = await installation.cold_start(failures, history, workers)
            restart = await installation.restart(failures)
            await nc.close()
        if logs is not None:
            keep_logs(workdir, logs)
    pods = jobs * (workers + 1)
    return {
        "jobs": jobs,
        "workers": workers,
        "pods": pods,
        **cold,
        "restart": restart,
        "watcher_bytes_per_pod": round(cold["peak_rss_mib"]["watcher"] * 1024 * 1024 / pods),
    }


def keep_logs(workdir: Path, logs: Path) -> None:
    """Copy each process's log out of the temporary directory."""
    logs.mkdir(parents=True, exist_ok=True)
    for name in PARTS:
        shutil.copy(workdir / f"{name}.log", logs / f"{name}.log")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--failures", type=int, default=20)
    parser.add_argument(
        "--history", type=int, default=1000, help="past runs put through the cluster before the restart"
    )
    parser.add_argument("--logs", type=Path, help="keep each process's log in this directory")
    args = parser.parse_args()
    report("coldstart", asyncio.run(measure(args.jobs, args.workers, args.failures, args.history, args.logs)))
