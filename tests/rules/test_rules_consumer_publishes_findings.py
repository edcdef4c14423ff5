"""Scenario files → watcher pipeline → real JetStream → rules consumer → ``findings.*``.

The consumer runs in process, on a connection of its own, with a clock the test moves along the
scenario's own timeline (``observed_at``), so thresholds are crossed when the story says.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from nats.js import JetStreamContext

from consumers.rules import CONSUMER, RuleEngine, RulesMetrics, RulesService, WarmStart, run_ticker
from consumers.rules import durable as rules_durable
from controller.bus.consuming import consuming
from controller.bus.publishing import MSG_ID, Publisher
from controller.bus.streams import connect, ensure_streams, wait_until_consumed
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent, DeadLetter
from controller.contract.findings import Finding, message_id, parse_finding
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from tests.conftest import SCENARIOS, Stage
from watchers.correlating import Correlator, Observation
from watchers.pipeline import Pipeline
from watchers.recording import read_observations

OOM = "Worker 2 failed: out of memory (limit 16Gi)"
GPU_OOM = "Rank 18 on worker-2 failed: CUDA out of memory"
OUTAGE_RETRY_S = 1.0
"""How long a publish keeps retrying in the outage test: long enough to retry, short to wait out."""


@dataclass
class ScenarioClock:
    """The consumer's clock: wherever the story has got to."""

    now: datetime

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True)
class Published:
    subject: str
    msg_id: str | None
    finding: Finding


def observations(name: str) -> list[Observation]:
    return list(read_observations(SCENARIOS / name))


@contextlib.asynccontextmanager
async def rules_running(
    stage: Stage,
    clock: ScenarioClock,
) -> AsyncIterator[tuple[RulesService, WarmStart]]:
    """One rules consumer process (a connection of its own): warm start, then the durable and the ticker."""
    assert stage.settings.nats.url
    nc = await connect(stage.settings.nats.url, "tests-rules")
    durable, service = rules_durable(
        stage.topology, stage.settings.rules, nc.jetstream(), stage.metrics, clock
    )
    warm = await service.warm_start()
    stop = asyncio.Event()
    try:
        async with consuming(nc, stage.topology, stage.settings.consumer, [durable], stage.metrics):
            ticker = asyncio.create_task(run_ticker(service, 0.1, stop))
            try:
                yield service, warm
            finally:
                stop.set()
                await ticker
    finally:
        await nc.close()


async def feed(pipeline: Pipeline, clock: ScenarioClock, chunk: Sequence[Observation]) -> None:
    """Publish a chunk of the story with the clock at its last moment."""
    clock.now = max(o.observed_at for o in chunk)
    await pipeline.feed(chunk)


def bus_events(story: Sequence[Observation]) -> list[BusEvent]:
    """The bus events a watcher makes of ``story``."""
    correlator = Correlator(30, time.monotonic)
    return [event for o in story for event in correlator.observe(o)]


def split(story: list[Observation], at: datetime) -> tuple[list[Observation], list[Observation]]:
    return [o for o in story if o.observed_at < at], [o for o in story if o.observed_at >= at]


async def consumed(js: JetStreamContext, topology: Topology) -> None:
    await wait_until_consumed(js, topology.stream("jobs"), topology.durable(CONSUMER), timeout_s=20)


async def findings_on_bus(js: JetStreamContext, topology: Topology) -> list[Published]:
    """Every message of this test's FINDINGS stream, in order."""
    info = await js.stream_info(topology.stream("findings"))
    if not info.state.messages:
        return []
    sub = await js.pull_subscribe(topology.wildcard("findings"), stream=topology.stream("findings"))
    found: list[Published] = []
    while len(found) < info.state.messages:
        for msg in await sub.fetch(info.state.messages - len(found), timeout=5):
            headers = msg.headers or {}
            found.append(Published(msg.subject, headers.get(MSG_ID), parse_finding(msg.data)))
    await sub.unsubscribe()
    return found


def published_count(metrics: PipelineMetrics, rule: str, status: str = "firing") -> float:
    value = metrics.registry.get_sample_value(
        "mpijc_findings_published_total", {"rule": rule, "status": status}
    )
    return value or 0.0


async def test_oomkilled_worker_is_published_as_one_oom_finding(stage: Stage) -> None:
    story = observations("mpijob-worker-oomkilled.jsonl")
    clock = ScenarioClock(story[0].observed_at)
    pipeline = Pipeline(Publisher(stage.js, stage.topology).publish, stage.metrics, 5)
    async with rules_running(stage, clock):
        await feed(pipeline, clock, story)
        await consumed(stage.js, stage.topology)

    (published,) = await findings_on_bus(stage.js, stage.topology)
    finding = published.finding
    assert published.subject == stage.topology.finding("team-a", "llm-sft-13b", "oom")
    assert published.msg_id == message_id(finding)
    assert (finding.rule, finding.status, finding.revision, finding.root_cause) == ("oom", "firing", 1, OOM)
    assert finding.job.name == "llm-sft-13b" and finding.job.namespace == "team-a"
    assert {(e.source, e.field, e.value) for e in finding.evidence} >= {
        ("pod/llm-sft-13b-worker-2", "containers[worker].state.terminated.reason", "OOMKilled"),
        ("pod/llm-sft-13b-worker-2", "resources.limits.memory", "16Gi"),
    }
    assert finding.doc_anchor == "docs/troubleshooting.md#oom"
    assert published_count(stage.metrics, "oom") == 1


async def test_the_same_story_published_again_adds_no_finding(stage: Stage) -> None:
    story = observations("mpijob-worker-oomkilled.jsonl")
    clock = ScenarioClock(story[-1].observed_at)
    async with rules_running(stage, clock):
        await feed(Pipeline(Publisher(stage.js, stage.topology).publish, stage.metrics, 5), clock, story)
        await consumed(stage.js, stage.topology)
        # a second watcher process (fresh correlator) replays the same story
        await feed(Pipeline(Publisher(stage.js, stage.topology).publish, stage.metrics, 5), clock, story)
        await consumed(stage.js, stage.topology)

    assert [p.finding.rule for p in await findings_on_bus(stage.js, stage.topology)] == ["oom"]


async def test_findings_computed_twice_are_stored_once(stage: Stage) -> None:
    """A process that dies after publishing, before acking, recomputes the same changes:
    JetStream drops them on their ``Nats-Msg-Id``."""
    story = observations("mpijob-worker-oomkilled.jsonl")
    clock = ScenarioClock(story[-1].observed_at)
    events = bus_events(story)
    services = [
        rules_durable(stage.topology, stage.settings.rules, stage.js, stage.metrics, clock)[1]
        for _ in range(2)
    ]

    stored = [await service.observe(events) for service in services]

    assert stored == [1, 0]
    assert len(await findings_on_bus(stage.js, stage.topology)) == 1
    assert stage.metrics.registry.get_sample_value("mpijc_findings_duplicates_total") == 1


async def test_poison_message_goes_to_the_rules_dead_letter_subject(stage: Stage) -> None:
    story = observations("mpijob-worker-oomkilled.jsonl")
    clock = ScenarioClock(story[-1].observed_at)
    pipeline = Pipeline(Publisher(stage.js, stage.topology).publish, stage.metrics, 5)
    subject = stage.topology.job_event(bus_events(story)[0])
    async with rules_running(stage, clock):
        await stage.js.publish(subject, b"not json at all")
        await feed(pipeline, clock, story)
        await consumed(stage.js, stage.topology)

    sub = await stage.js.pull_subscribe(
        stage.topology.dead_letter(CONSUMER), stream=stage.topology.stream("dlq")
    )
    (msg,) = await sub.fetch(1, timeout=5)
    await sub.unsubscribe()
    letter = DeadLetter.model_validate_json(msg.data)
    assert (letter.consumer, letter.subject, letter.payload) == (CONSUMER, subject, "not json at all")
    assert "undecodable payload" in letter.error
    assert [p.finding.rule for p in await findings_on_bus(stage.js, stage.topology)] == ["oom"]


async def test_warm_start_rebuilds_the_runs_so_a_later_failure_is_judged_in_full(stage: Stage) -> None:
    """Which worker holds rank 18 comes from the job's spec and pods, seen before the restart."""
    story = observations("mpijob-gpu-oom.jsonl")
    running, failing = split(story, datetime(2026, 11, 20, 10, 5, tzinfo=UTC))
    clock = ScenarioClock(story[0].observed_at)
    pipeline = Pipeline(
        Publisher(stage.js, stage.topology).publish, stage.metrics, 5
    )  # the watcher keeps running
    async with rules_running(stage, clock):
        await feed(pipeline, clock, running)
        await consumed(stage.js, stage.topology)
    assert await findings_on_bus(stage.js, stage.topology) == []

    async with rules_running(stage, clock) as (_, warm):
        await feed(pipeline, clock, failing)
        await consumed(stage.js, stage.topology)

    (published,) = await findings_on_bus(stage.js, stage.topology)
    assert published.subject == stage.topology.finding("team-a", "llm-sft-70b-lora", "gpu-oom")
    assert (published.finding.root_cause, published.finding.revision) == (GPU_OOM, 1)
    assert any("CUDA out of memory" in e.value for e in published.finding.evidence)
    assert warm.replayed == len(bus_events(running)) and warm.reconciled == 0
    # the split matters: an stage.engine that starts cold at the failure first publishes less
    cold, after_restart = RuleEngine(), bus_events(story)[warm.replayed :]
    first = next(f for e in after_restart for f in cold.observe(e, e.observed_at))
    assert first.root_cause != GPU_OOM


async def test_failure_published_while_no_consumer_runs_is_not_lost_nor_repeated(stage: Stage) -> None:
    story = observations("mpijob-worker-oomkilled.jsonl")
    running, failing = split(story, datetime(2026, 11, 20, 10, 10, tzinfo=UTC))
    clock = ScenarioClock(story[0].observed_at)
    pipeline = Pipeline(Publisher(stage.js, stage.topology).publish, stage.metrics, 5)
    async with rules_running(stage, clock):
        await feed(pipeline, clock, running)
        await consumed(stage.js, stage.topology)

    await feed(pipeline, clock, failing)  # the consumer is down: the failure waits in JOBS

    async with rules_running(stage, clock) as (_, warm):
        await consumed(stage.js, stage.topology)  # the durable redelivers what the replay already folded in
    assert warm.reconciled == 1
    async with rules_running(stage, clock) as (_, again):
        await consumed(stage.js, stage.topology)
    assert (again.replayed, again.published_known, again.reconciled) == (len(bus_events(story)), 1, 0)

    (published,) = await findings_on_bus(stage.js, stage.topology)
    assert (published.finding.rule, published.finding.root_cause) == ("oom", OOM)
    assert published.msg_id == message_id(published.finding)


async def test_findings_that_cannot_be_published_wait_and_the_batch_is_retried(stage: Stage) -> None:
    story = observations("mpijob-worker-oomkilled.jsonl")
    clock = ScenarioClock(story[-1].observed_at)
    service = RulesService(
        RuleEngine(stage.settings.rules),
        stage.js,
        stage.topology,
        RulesMetrics.on(stage.metrics.registry),
        clock,
        publish_retry_s=OUTAGE_RETRY_S,  # not the 20 s default: the test would wait it out
    )
    await stage.js.delete_stream(stage.topology.stream("findings"))  # nothing takes findings: a NATS outage

    with pytest.raises(RetryableError, match="1 finding changes not published"):
        await service.observe(bus_events(story))
    assert service.unpublished == 1

    await ensure_streams(stage.js, stage.topology, stage.settings.nats)
    assert await service.observe([]) == 1  # the redelivered batch changes nothing, but flushes
    assert service.unpublished == 0
    assert [p.finding.rule for p in await findings_on_bus(stage.js, stage.topology)] == ["oom"]
