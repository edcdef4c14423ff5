"""Cold start and restart on a big cluster: how soon the controller is caught up, and how late failures are.

A simulated cluster of ``--jobs`` running MPIJobs x ``--workers`` running workers + launcher is
in place before the controller starts. The controller runs as deployed, one process per part
(``watch``, ``consume --only history``, ``consume --only rules``, ``api``) on embedded PostgreSQL
and NATS. Every failure latency is measured twice: ``bus``, until the finding is on the FINDINGS
stream, and ``api``, until it is readable through the API (``GET /api/v1/runs/{uid}/findings``
lists it, polled every 50 ms), which is what a user waits for; and ``jobs``, until the
OOM-killed pod is on the JOBS stream (the watcher's part of the wait). Printed:

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

``--up`` measures the same through ``mpijob-controller up``, as users run it: one ``up`` on its
embedded PostgreSQL and NATS (with the NATS users, in a data directory prepared as the separate
processes' services are: migrated, streams declared), running every part it runs (audit,
notify, dispatch and the rest beside the four above), stopped with SIGTERM and started again for
the restart. Printed as well: ``api_answers_s`` after each start; ``after_sigkill``: every process
of the installation SIGKILLed once it has settled (:func:`benchmarks.uptree.kill_everything`)
and ``up`` started again, the API's answer and the same OOM batches as after the restart; and
``peak_rss_mib``: per part, the sum over ``up``'s Python processes of their peaks
(``python_sum_of_peaks``), the highest sum of their resident memory sampled every 0.25 s
(``python_sampled_peak``), and nats-server and PostgreSQL (proportional set size: its backends
share their buffers) apart; ``python_cpu_s``: the CPU seconds the Python processes used from the
phase's start of ``up`` until its last figures, in all and per part (``python_cpu_s.watcher`` …),
and nats-server's (``nats_cpu_s``).
``--logs`` keeps ``up.log`` (every part writes there) and ``parts.json`` (pid → part); the
1-minute load is printed at the start and the end.

    .venv/bin/python -m benchmarks.coldstart [--jobs 1000] [--workers 16] [--failures 20] [--history 1000]
        [--up]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.js import JetStreamContext

from benchmarks.harness import profiled, report
from benchmarks.uptree import TreeMemory, kill_everything, start_up, until_answers
from controller.bus.streams import credentials, ensure_streams
from controller.bus.versions import BUCKET
from controller.cli.embedded import EmbeddedServices, die_with_this_process
from controller.contract.events import PodObserved, parse_event
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
SETTLE_S = 15.0
"""Before the SIGKILL of ``--up``: how long ``up`` runs after its API answers (relist, warm starts)."""


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
    """The four processes, with the environment of one installation."""

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


class UpController(Controller):
    """``mpijob-controller up`` as users run it, on its embedded services in ``workdir``: every
    part writes to ``up.log``; its processes' memory is sampled while it runs."""

    memory: TreeMemory | None = None

    def start(self) -> None:
        self.processes["up"] = start_up(self.env, self.workdir)
        self.memory = TreeMemory(self.processes["up"].pid, self.workdir)

    def log_size(self, name: str) -> int:
        return super().log_size("up")

    def log_since(self, name: str, offset: int) -> str:
        return super().log_since("up", offset)

    def peak_rss_mib(self) -> dict[str, float]:
        assert self.memory is not None, "not started"
        return self.memory.figures()

    def _stopped(self) -> None:
        """Stop sampling; note which pid was which part in ``parts.json`` (for reading ``up.log``)."""
        assert self.memory is not None, "not started"
        self.memory.stop()
        known = self.workdir / "parts.json"
        parts = json.loads(known.read_text()) if known.exists() else {}
        parts.update({str(pid): f"{self.run}.{name}" for pid, name in self.memory.parts.items()})
        known.write_text(json.dumps(parts, indent=1) + "\n")

    def stop(self, grace_s: float = 60) -> None:
        """SIGTERM to ``up``, which stops its parts and its services."""
        self._stopped()
        super().stop(grace_s)

    def kill(self) -> None:
        """SIGKILL every process of the installation at once."""
        self._stopped()
        kill_everything(self.processes["up"], self.workdir)


class Findings:
    """Arrival time of the first firing ``oom`` finding of each job, from FINDINGS; and of its
    first OOM-killed pod on JOBS (``failed``: the watcher's part of the wait)."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.failed: dict[str, float] = {}

    async def on(self, msg: Msg) -> None:
        finding = parse_finding(msg.data)
        if finding.rule == "oom" and finding.status == "firing":
            self.arrived.setdefault(finding.job.name, time.monotonic())

    async def on_urgent(self, msg: Msg) -> None:
        """A failure signal on JOBS (``jobs.<ns>.<job>.urgent``): an OOM-killed pod's is noted."""
        event = parse_event(msg.data)
        if isinstance(event, PodObserved) and any(c.reason == "OOMKilled" for c in event.containers):
            self.failed.setdefault(event.job.name, time.monotonic())


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
    api_port: int
    kind: type[Controller] = Controller

    async def messages(self) -> int:
        """Messages on JOBS (0 while ``up``'s NATS is not up yet: the bench reconnects)."""
        try:
            return await self.stream_size(self.topology.stream("jobs"))
        except (NatsError, TimeoutError):
            return 0

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
        failed = self.findings.failed
        on_jobs = {"jobs": percentiles(injected, failed)} if all(n in failed for n in injected) else {}
        return {
            **on_jobs,
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

    async def messages_once_reachable(self) -> int:
        """Messages on JOBS, once NATS answers (``up`` starts it before any part)."""
        while True:
            try:
                return await self.stream_size(self.topology.stream("jobs"))
            except (NatsError, TimeoutError):
                await asyncio.sleep(0.02)

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

        controller = self.kind(self.env, self.workdir, "cold")
        started = time.monotonic()
        controller.start()
        answers = asyncio.create_task(self.answers(started))
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
                "api_answers_s": await answers,
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

    async def answers(self, started: float) -> float:
        """Seconds from ``started`` until the API answers ``GET /api/v1/runs``."""
        return round(await asyncio.to_thread(until_answers, self.api_port, started), 2)

    async def oom_batches(self, started: float, first: int, failures: int) -> dict[str, Any]:
        """``failures`` OOM kills 1, 3 and 5 s after ``started`` (batch ``first`` of ``failures``
        jobs, then the next two), each batch at its time whatever the batches before it wait."""

        async def kill_after(n: int, delay: float) -> dict[str, Any]:
            await asyncio.sleep(max(0.0, started + delay - time.monotonic()))
            injected = self.inject([f"job-{j}" for j in range(n * failures, (n + 1) * failures)])
            at = round(min(injected.values()) - started, 2)
            return {"injected_s_after_start": at, **await self.found(injected)}

        batches = await asyncio.gather(
            *(kill_after(n, delay) for n, delay in enumerate(RESTART_DELAYS_S, start=first))
        )
        return {f"kill_{delay:g}s_after_start": b for delay, b in zip(RESTART_DELAYS_S, batches, strict=True)}

    async def restart(self, failures: int) -> dict[str, Any]:
        """Start again on the unchanged cluster; kill workers 1, 3 and 5 s after the start."""
        controller = self.kind(self.env, self.workdir, "restart")
        logs = {name: controller.log_size(name) for name in PARTS}
        restarted = time.monotonic()
        controller.start()
        try:
            batches = asyncio.create_task(self.oom_batches(restarted, 1, failures))
            answers = asyncio.create_task(self.answers(restarted))
            before = await self.messages_once_reachable()  # the watcher starts well after NATS
            latency = await batches
            await asyncio.sleep(3)
            return {
                "api_answers_s": await answers,
                "new_messages": await self.messages() - before - failures * len(RESTART_DELAYS_S),
                "oom_latency_s": latency,
                **read_of_history(controller, logs),
                "peak_rss_mib": controller.peak_rss_mib(),
            }
        finally:
            controller.stop()

    async def after_sigkill(self, failures: int) -> dict[str, Any]:
        """``up`` started, settled, every process SIGKILLed at once, ``up`` started again: when the
        API answers, and kills 1, 3 and 5 s after that start (the batches after the restart's)."""
        settled = UpController(self.env, self.workdir, "settled")
        settled.start()
        try:
            await self.answers(time.monotonic())
            await asyncio.sleep(SETTLE_S)
        finally:
            await asyncio.to_thread(settled.kill)
        controller = UpController(self.env, self.workdir, "killed")
        started = time.monotonic()
        controller.start()
        try:
            answers = asyncio.create_task(self.answers(started))
            latency = await self.oom_batches(started, 5, failures)  # after the steady batch (4)
            return {
                "api_answers_s": await answers,
                "oom_latency_s": latency,
                "peak_rss_mib": controller.peak_rss_mib(),
            }
        finally:
            controller.stop()


async def _reconnecting(_: Exception) -> None:
    """The bench's connection while ``up``'s NATS is stopped: it reconnects, nothing to print."""


async def connect_bench(services: EmbeddedServices) -> NATS:
    """The bench's own connection (as ``admin`` on ``up``'s NATS with users), back within 50 ms
    whenever ``up`` starts NATS again."""
    admin = services.nats_users.settings("admin", NatsSettings()) if services.nats_users else None
    return await nats.connect(
        services.nats_url,
        name="coldstart",
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.05,
        error_cb=_reconnecting,
        **(credentials(admin) if admin else {}),
    )


def environment(
    services: EmbeddedServices,
    workdir: Path,
    ports: tuple[int, int],
    sim: SimCluster,
    topology: Topology,
    up: bool,
) -> dict[str, str]:
    """The installation's settings. ``up`` starts the services itself, in the same data
    directory on the same ports (its parts get their NATS identities from it); the separate
    processes are given their URLs."""
    reached = (
        {
            "MPIJC_EMBEDDED__DATA_DIR": str(workdir),
            "MPIJC_EMBEDDED__POSTGRES_PORT": str(ports[0]),
            "MPIJC_EMBEDDED__NATS_PORT": str(ports[1]),
            "MPIJC_METRICS__PORT": str(free_port()),
            "MPIJC_METRICS__UP_PORT": str(free_port()),
        }
        if up
        else {
            "MPIJC_DATABASE__URL": services.database_url,
            "MPIJC_DATABASE__SINGLE_ROLE": "true",
            "MPIJC_NATS__URL": services.nats_url,
            "MPIJC_METRICS__PORT": "0",
        }
    )
    return {
        **os.environ,
        **reached,
        "MPIJC_NATS__PREFIX": topology.prefix,
        "MPIJC_KUBE__KUBECONFIG": str(sim.kubeconfig(workdir / "kubeconfig")),
        "MPIJC_API__PORT": str(free_port()),
        "MPIJC_API__AUTH": "off",  # one local reader; auth is measured in benchmarks.api
        "MPIJC_API__RATE_PER_S": "0",
        "MPIJC_LOG_LEVEL": "INFO",
    }


async def measure(
    jobs: int, workers: int, failures: int, history: int, logs: Path | None = None, up: bool = False
) -> dict[str, Any]:
    topology = Topology("cold")
    load_at_start = round(os.getloadavg()[0], 1)
    with tempfile.TemporaryDirectory(prefix="mpijc-coldstart-") as tmp, SimCluster() as sim:
        workdir = Path(tmp)
        victims, uids = populate(sim, jobs, workers)
        ports = free_port(), free_port()
        # the separate processes without NATS users (the bench reads the findings itself); `up`'s
        # services are prepared as it makes them (the bench connects as admin), then stopped
        try:
            services = EmbeddedServices(
                workdir, *ports, None, None, nats_prefix=topology.prefix, nats_users=up
            )
            with services:
                await migrate.upgrade_async(services.database_url)
                nc = await connect_bench(services)
                js = nc.jetstream()
                await ensure_streams(js, topology, NatsSettings())
                findings = Findings()
                await nc.subscribe(topology.wildcard("findings"), cb=findings.on)
                urgent = topology.job_observations().removesuffix(".job") + ".urgent"
                await nc.subscribe(urgent, cb=findings.on_urgent)
                env = environment(services, workdir, ports, sim, topology, up)
                if up:
                    services.close()
                api_port = int(env["MPIJC_API__PORT"])
                api = ApiFindings(f"http://127.0.0.1:{api_port}", uids)
                installation = Installation(
                    sim,
                    js,
                    topology,
                    env,
                    workdir,
                    victims,
                    findings,
                    api,
                    api_port,
                    UpController if up else Controller,
                )
                cold = await installation.cold_start(failures, history, workers)
                restart = await installation.restart(failures)
                killed = {"after_sigkill": await installation.after_sigkill(failures)} if up else {}
                await nc.close()
        finally:  # the logs of a failed run too
            if logs is not None:
                keep_logs(workdir, logs)
    pods = jobs * (workers + 1)
    return {
        "mode": "up" if up else "parts",
        "jobs": jobs,
        "workers": workers,
        "pods": pods,
        "cpus": os.cpu_count(),
        "load_1min": {"start": load_at_start, "end": round(os.getloadavg()[0], 1)},
        **cold,
        "restart": restart,
        **killed,
        "watcher_bytes_per_pod": round(cold["peak_rss_mib"]["watcher"] * 1024 * 1024 / pods),
    }


def keep_logs(workdir: Path, logs: Path) -> None:
    """Copy each process's log (``up.log`` for ``up``: all of them) out of the temporary directory."""
    logs.mkdir(parents=True, exist_ok=True)
    for kept in [*workdir.glob("*.log"), *workdir.glob("parts.json")]:
        shutil.copy(kept, logs / kept.name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--failures", type=int, default=20)
    parser.add_argument(
        "--history", type=int, default=1000, help="past runs put through the cluster before the restart"
    )
    parser.add_argument("--logs", type=Path, help="keep each process's log in this directory")
    parser.add_argument("--up", action="store_true", help="through `mpijob-controller up`, as users run it")
    args = parser.parse_args()
    result = asyncio.run(measure(args.jobs, args.workers, args.failures, args.history, args.logs, args.up))
    report("coldstart_up" if args.up else "coldstart", result)
