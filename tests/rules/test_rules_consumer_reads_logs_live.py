"""Followed output on ``LOGS`` → the rules' log reader → the job's JOBS subject → rules consumer → ``findings.*``.

Real JetStream end to end: the reader's durable on ``LOGS`` and the rules consumer run in
process with a clock the test moves along the story. A fatal line is a finding while its pod
still runs, and the failure-time tail that follows adds none; a CUDA out-of-memory the run
recovers from is a pending observation that resolves, and the run's success leaves nothing firing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from nats.js import JetStreamContext

from consumers.rules.logreader import CONSUMER as READER
from consumers.rules.logreader import LogReader
from consumers.rules.logreader import durable as reader_durable
from controller.bus.consuming import consuming
from controller.bus.logstore import publish_batches
from controller.bus.publishing import Publisher
from controller.bus.streams import connect, wait_until_consumed
from controller.contract.events import BusEvent, LogSeen, parse_event
from controller.contract.logs import LogBatch
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing.events import (
    at,
    failed_launcher,
    job,
    launcher,
    log_batch,
    running_run,
    terminated,
)
from tests.conftest import Stage
from tests.rules.test_rules_consumer_publishes_findings import (
    ScenarioClock,
    consumed,
    findings_on_bus,
    rules_running,
)

ABORT = (
    "[1,5]<stderr>:MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD",
    "[1,5]<stderr>:with errorcode 1.",
)
OOM = "[1,3]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB."


@contextlib.asynccontextmanager
async def reader_running(
    settings: Settings, topology: Topology, metrics: PipelineMetrics, clock: ScenarioClock
) -> AsyncIterator[None]:
    """The rules role's log reader, on a connection of its own."""
    assert settings.nats.url
    nc = await connect(settings.nats.url, "tests-rules-logs")
    reader = LogReader(Publisher(nc.jetstream(), topology), clock, settings.rules.live_activity_s)
    try:
        async with consuming(nc, topology, settings.consumer, [reader_durable(reader)], metrics):
            yield
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def running_and_read(stage: Stage) -> AsyncIterator[tuple[Publisher, ScenarioClock]]:
    """The rules consumer and the log reader, and a run the rules know is running."""
    clock = ScenarioClock(at(0))
    publisher = Publisher(stage.js, stage.topology)
    async with (
        rules_running(stage, clock),
        reader_running(stage.settings, stage.topology, stage.metrics, clock),
    ):
        await observed(publisher, stage.js, stage.topology, clock, *running_run())
        yield publisher, clock


async def printed(js: JetStreamContext, topology: Topology, clock: ScenarioClock, batch: LogBatch) -> None:
    """A follower stores ``batch`` (when its last line was printed); the reader and the rules take it in."""
    clock.now = datetime.fromtimestamp(max(line.ts for line in batch.lines) / 1e9, UTC)
    await publish_batches(js, topology, [batch], 5.0)
    await wait_until_consumed(js, topology.stream("logs"), topology.durable(READER), timeout_s=20)
    await consumed(js, topology)


async def observed(
    publisher: Publisher, js: JetStreamContext, topology: Topology, clock: ScenarioClock, *events: BusEvent
) -> None:
    """The watcher publishes ``events`` (the clock at the last); the rules take them in."""
    clock.now = max(e.observed_at for e in events)
    await publisher.publish(events)
    await consumed(js, topology)


async def test_a_fatal_line_is_a_finding_before_the_pod_ends_and_its_tail_adds_none(stage: Stage) -> None:
    async with running_and_read(stage) as (
        publisher,
        clock,
    ):
        await printed(
            stage.js,
            stage.topology,
            clock,
            log_batch("[1,0]<stdout>:epoch 1 step 90", *ABORT, observed_at=at(5)),
        )

        (live,) = await findings_on_bus(stage.js, stage.topology)
        tail = "\n".join(("[1,0]<stdout>:epoch 1 step 90", *ABORT))
        await observed(
            publisher, stage.js, stage.topology, clock, failed_launcher(tail, observed_at=at(5, 2))
        )
        await observed(publisher, stage.js, stage.topology, clock, job("Failed", observed_at=at(5, 4)))

    assert (live.finding.rule, live.finding.status, live.finding.severity) == (
        "mpi-abort",
        "firing",
        "critical",
    )
    assert live.finding.root_cause.startswith("Rank 5 on worker-0 aborted (exit 1)")
    assert [p.finding.rule for p in await findings_on_bus(stage.js, stage.topology)] == ["mpi-abort"]


async def test_a_recovered_cuda_oom_is_an_observation_that_resolves_in_a_run_that_succeeds(
    stage: Stage,
) -> None:
    async with running_and_read(stage) as (
        publisher,
        clock,
    ):
        await printed(stage.js, stage.topology, clock, log_batch(OOM, observed_at=at(5)))
        went_on = ("[1,3]<stdout>:batch size 16 fits", "[1,0]<stdout>:epoch 1 step 200")
        await printed(stage.js, stage.topology, clock, log_batch(*went_on, observed_at=at(5, 30), step_s=60))
        ended = terminated("Completed", 0, name="launcher")
        await observed(
            publisher,
            stage.js,
            stage.topology,
            clock,
            launcher(observed_at=at(20), phase="Succeeded", ready=False, containers=(ended,)),
        )
        await observed(publisher, stage.js, stage.topology, clock, job("Succeeded", observed_at=at(20, 5)))

    published = [p.finding for p in await findings_on_bus(stage.js, stage.topology)]
    changes = [(f.rule, f.status, f.severity) for f in published]
    assert changes == [("gpu-oom", "pending", "warning"), ("gpu-oom", "resolved", "warning")]
    assert published[0].root_cause == (
        'Rank 3 on worker-0 printed "[1,3]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to '
        'allocate 4.22 GiB." at 10:05:00 UTC; the job is still running'
    )


async def test_the_reader_publishes_what_a_batch_says_on_the_jobs_own_subject(stage: Stage) -> None:
    clock = ScenarioClock(at(5))
    batch = log_batch("[1,0]<stdout>:step 1", OOM, "[1,3]<stderr>:  more", observed_at=at(5))
    async with reader_running(stage.settings, stage.topology, stage.metrics, clock):
        await publish_batches(stage.js, stage.topology, [batch, batch], 5.0)  # stored once
        await wait_until_consumed(
            stage.js, stage.topology.stream("logs"), stage.topology.durable(READER), timeout_s=20
        )

    sub = await stage.js.pull_subscribe(stage.topology.wildcard("jobs"), stream=stage.topology.stream("jobs"))
    (msg,) = await sub.fetch(1, timeout=5)
    await sub.unsubscribe()
    seen = parse_event(msg.data)
    assert isinstance(seen, LogSeen) and msg.subject == stage.topology.job_event(seen)
    assert (seen.job.uid, seen.uid, seen.container, seen.lines) == (
        batch.run_uid,
        batch.pod_uid,
        "launcher",
        3,
    )
    assert [(m.rank, m.signature, m.line) for m in seen.marks] == [
        (3, "gpu-oom/oom", OOM),
        (3, None, batch.lines[2].text),
    ]
    assert {(r.rank, r.last_at) for r in seen.ranks} == {(0, at(5)), (3, at(5))}
