"""Failure drills: a scripted burst of job stories through the real processes, a fault in the
middle, and what came out at the end.

A :class:`Drill` feeds OOM stories through the watcher pipeline (in this process) to
``mpijob-controller consume`` processes (all roles, or ``--only`` some) that write the
history, publish findings and deliver webhooks to a local :class:`Receiver`. The caller
injects the fault — SIGKILL of a consumer process, a NATS server killed, PostgreSQL
restarted — and :meth:`Drill.outcome` says what, if anything, was lost or repeated.
:meth:`Drill.probe` times one failure from the pipeline to its delivered ``finding.firing``
webhook, which the drills benchmark uses as the time to recover. Tests assert the outcome;
only the benchmark reports times.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import subprocess
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from nats.js import JetStreamContext
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.publishing import Publisher
from controller.bus.reading import last_sequence, read_stream
from controller.bus.streams import wait_until_consumed
from controller.contract.findings import Finding, parse_finding
from controller.contract.settings import Settings
from controller.contract.subjects import (
    AUDIT_LIFECYCLE_DURABLE,
    HISTORY_DURABLE,
    HISTORY_FINDINGS_DURABLE,
    NOTIFY_DURABLE,
    RULES_DURABLE,
    Topology,
)
from controller.metrics import PipelineMetrics
from controller.store.models import Base, FindingRow, PodStateRow, Run
from controller.testing.notify import api_client, subscribe, with_notify
from controller.testing.processes import cli_env, start_cli
from controller.testing.receivers import Receiver
from controller.testing.stories import oom_story, story_start
from controller.testing.waits import until
from watchers.correlating import Observation
from watchers.pipeline import Pipeline

PATH = "drill"
EXPECTED = (("job.failed", ""), ("finding.firing", "oom"))
"""Webhooks every story must cause: (event type, rule of the finding)."""
PROBES = 6
"""Failures fed at the moment of a fault: enough to land in every rules partition, most likely."""
DURABLES = (HISTORY_DURABLE, NOTIFY_DURABLE, AUDIT_LIFECYCLE_DURABLE, RULES_DURABLE)
"""Durables on JOBS that must have consumed everything before the outcome is read."""


def stories(first: int, count: int, prefix: str = "job", slot: int | None = None) -> list[Observation]:
    """OOM stories ``prefix-first`` … ``prefix-(first+count-1)``, in the order a cluster shows them,
    one after another in event time from :func:`story_start` of ``slot`` (default ``first``)."""
    start = first if slot is None else slot
    return [
        o
        for n, i in enumerate(range(first, first + count))
        for o in oom_story(name=f"{prefix}-{i}", workers=3, start=story_start(start + n))
    ]


@dataclass
class DrillOutcome:
    """What a drill's burst left behind, against what it should have."""

    jobs: int
    runs: int
    pod_states: int
    expected_pod_states: int
    oom_findings: int
    repeated_findings: dict[tuple[str, int, str], int]
    missing_webhooks: list[tuple[str, str, str]]
    resent_webhooks: list[tuple[str, str, str]]
    unexpected_webhooks: list[tuple[str, str, str]]
    """Deliveries no story should cause: a stall finding in a burst of OOM stories is a false alarm."""
    unverified_webhooks: int

    @property
    def complete(self) -> bool:
        """Every event stored, every finding once, every webhook delivered once (one id each), and
        nothing else delivered."""
        return (
            self.runs == self.jobs
            and self.pod_states == self.expected_pod_states
            and self.oom_findings == self.jobs
            and not self.repeated_findings
            and not self.missing_webhooks
            and not self.resent_webhooks
            and not self.unexpected_webhooks
            and not self.unverified_webhooks
        )


FaultInjector = Callable[[], Awaitable[Awaitable[None] | None]]
"""Injects the fault; may return what ends it (a server started again), awaited beside the burst."""


@dataclass
class Burst:
    """A burst with a fault in the middle: what came out, and (if timed) how long failures waited."""

    outcome: DrillOutcome
    baseline_s: float | None = None
    """Median of three failures fed before the fault, each until its ``finding.firing`` webhook."""
    recovery_s: float | None = None
    """The same for a failure fed at the moment of the fault."""


@dataclass
class Drill:
    """One burst through real consumer processes; see the module docstring."""

    settings: Settings
    topology: Topology
    js: JetStreamContext
    engine: AsyncEngine
    metrics: PipelineMetrics
    workdir: Path
    receiver: Receiver
    env: dict[str, str] = field(default_factory=dict)
    fed: list[Observation] = field(default_factory=list)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    slot: int = 0
    """The next story's slot of event time: what the drill feeds moves forward, as on a cluster."""

    async def subscribe(self) -> None:
        """A webhook subscription of the drill's receiver to failures and findings."""
        with_notify(self.settings)
        async with api_client(self.settings, self.engine, self.metrics) as api:
            await subscribe(api, self.receiver, PATH, event_types=["job.failed", "finding.firing"])

    def start(self, name: str, *only: str) -> subprocess.Popen[bytes]:
        """``consume`` (``--only`` roles) as process ``name``; waits for nothing."""
        env = cli_env(
            self.settings,
            self.workdir,
            MPIJC_NATS__REPLICAS=str(self.settings.nats.replicas),
            MPIJC_CONSUMER__BATCH_SIZE="20",
            MPIJC_CONSUMER__ACK_WAIT_S="3",
            MPIJC_CONSUMER__RULES_LEASE_TTL_S="3",
            MPIJC_NOTIFY__ALLOW_CIDRS='["127.0.0.0/8"]',
            MPIJC_NOTIFY__POLL_INTERVAL_S="0.1",
            MPIJC_NOTIFY__REQUEST_TIMEOUT_S="1",
            MPIJC_NOTIFY__LEASE_S="10",  # a killed dispatcher's claims come back this soon
            **self.env,
        )
        args = ["consume", *(arg for role in only for arg in ("--only", role))]
        process = start_cli(args, env, self.workdir, self.log(name))
        self.processes[name] = process
        return process

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    async def running(self, name: str, timeout_s: float = 60) -> None:
        """Until process ``name`` says its consumers run."""
        log = self.log(name)
        await until(
            lambda: "consumers running" in log.read_text(), timeout_s, lambda: log.read_text()[-2000:]
        )

    async def feed(self, observations: list[Observation]) -> None:
        """Through the watcher pipeline, retrying what the bus refuses until it is taken."""
        self.fed += observations
        await Pipeline(Publisher(self.js, self.topology).publish, self.metrics, 5).feed(observations)

    async def stored_pod_states(self) -> int:
        return await rows_in(self.engine, PodStateRow)

    async def storing(self) -> bool:
        """Whether the history holds anything of the burst yet."""
        return await self.stored_pod_states() > 0

    async def settled(self, timeout_s: float = 120) -> None:
        """Until every durable consumed the burst and every expected webhook arrived."""
        for durable in DURABLES:
            await wait_until_consumed(
                self.js, self.topology.stream("jobs"), self.topology.durable(durable), timeout_s
            )
        await wait_until_consumed(  # the findings the outcome counts in the history
            self.js,
            self.topology.stream("findings"),
            self.topology.durable(HISTORY_FINDINGS_DURABLE),
            timeout_s,
        )
        await until(
            lambda: not self._missing(), timeout_s, lambda: f"webhooks missing: {self._missing()[:5]}", 0.05
        )
        await asyncio.sleep(1)  # a late duplicate delivery would arrive now

    async def probe(self, name: str, slot: int | None = None, timeout_s: float = 120) -> float:
        """Seconds from feeding one OOM story ``name`` (in ``slot``, else the next) to its
        ``finding.firing`` webhook."""
        slot = self._take(1) if slot is None else slot
        started = time.monotonic()
        await self.feed(oom_story(name=name, workers=3, start=story_start(slot)))
        await until(
            lambda: ("finding.firing", name, "oom") in self._delivered(), timeout_s, lambda: name, 0.01
        )
        return time.monotonic() - started

    async def burst(self, jobs: int, fault: FaultInjector, *, timed: bool = False) -> Burst:
        """Half of ``jobs`` stories, the fault once some are stored, the other half; settled.

        ``timed``: once the first half has settled, time failures on the idle controller, then
        at the moment of the fault — one per rules partition, or a partition whose replica
        died may be missed (:attr:`Burst.recovery_s` is the slowest)."""
        await self.feed(stories(0, jobs // 2, slot=self._take(jobs // 2)))
        await until(self.storing, 60)
        baseline = None
        if timed:
            await self.settled()
            baseline = statistics.median([await self.probe(f"baseline-{n}") for n in range(3)])
        ending = await fault()
        together = self._take(1)  # failures at the fault happen at once
        probes = [self.probe(f"at-fault-{n}", together) for n in range(PROBES)] if timed else []
        times, _ = await asyncio.gather(asyncio.gather(*probes), ending or asyncio.sleep(0))
        await self.feed(stories(jobs // 2, jobs - jobs // 2, slot=self._take(jobs - jobs // 2)))
        await self.settled(timeout_s=300)
        return Burst(await self.outcome(), baseline, max(times) if times else None)

    async def outcome(self) -> DrillOutcome:
        """What the burst left: compare with what it should have (see :class:`DrillOutcome`)."""
        names = {str(o.object["metadata"]["name"]) for o in self.fed if o.kind == "job"}
        delivered = self._delivered()
        findings = await findings_on_bus(self.js, self.topology)
        changes = Counter((f.id, f.revision, f.status) for f in findings)
        async with self.engine.connect() as conn:
            oom = (
                await conn.execute(
                    select(func.count()).select_from(FindingRow).where(FindingRow.rule == "oom")
                )
            ).scalar_one()
        return DrillOutcome(
            jobs=len(names),
            runs=await rows_in(self.engine, Run),
            pod_states=await self.stored_pod_states(),
            expected_pod_states=sum(1 for o in self.fed if o.kind == "pod"),
            oom_findings=oom,
            repeated_findings={key: n for key, n in changes.items() if n > 1},
            missing_webhooks=self._missing(),
            resent_webhooks=sorted(key for key, ids in delivered.items() if len(ids) > 1),
            unexpected_webhooks=sorted(key for key in delivered if key[0::2] not in EXPECTED),
            unverified_webhooks=sum(1 for r in self.receiver.at(PATH) if not r.verified),
        )

    def _take(self, stories: int) -> int:
        """The first of ``stories`` consecutive slots of event time."""
        first, self.slot = self.slot, self.slot + stories
        return first

    def _delivered(self) -> dict[tuple[str, str, str], set[str]]:
        """Webhook ids received per (event type, job, rule of the finding)."""
        ids: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        for request in self.receiver.at(PATH):
            body = request.payload
            rule = (body["data"].get("finding") or {}).get("rule", "")
            ids[(body["type"], body["data"]["job"]["name"], rule)].add(request.webhook_id)
        return ids

    def _missing(self) -> list[tuple[str, str, str]]:
        names = sorted({str(o.object["metadata"]["name"]) for o in self.fed if o.kind == "job"})
        delivered = self._delivered()
        return [
            (kind, name, rule)
            for name in names
            for kind, rule in EXPECTED
            if (kind, name, rule) not in delivered
        ]

    def stop(self, timeout_s: float = 30) -> dict[str, int | None]:
        """SIGTERM every process still running; their exit codes by name."""
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        codes: dict[str, int | None] = {}
        for name, process in self.processes.items():
            try:
                codes[name] = process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = None
        return codes


@contextlib.asynccontextmanager
async def drilling(
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    workdir: Path,
) -> AsyncIterator[Drill]:
    """A :class:`Drill` with a receiver of its own, subscribed; its processes stopped at the end
    (:meth:`Drill.stop` may be called before, for their exit codes)."""
    async with Receiver() as rx:
        drill = Drill(settings, topology, js, engine, metrics, workdir, rx)
        await drill.subscribe()
        try:
            yield drill
        finally:
            drill.stop()


async def rows_in(engine: AsyncEngine, model: type[Base]) -> int:
    """How many rows ``model``'s table holds."""
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count()).select_from(model))).scalar_one())


async def findings_on_bus(js: JetStreamContext, topology: Topology) -> list[Finding]:
    """Every finding change in the FINDINGS stream (read by one in-memory, single-replica reader:
    one of three replicas, with a server killed, took a fetch's time to elect its leader and
    answered it ``503``)."""
    stream = topology.stream("findings")
    upto = await last_sequence(js, stream)
    return [
        parse_finding(msg.data)
        async for msg in read_stream(js, stream, topology.wildcard("findings"), upto, 1000)
    ]
