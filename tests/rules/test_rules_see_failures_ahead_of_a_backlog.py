"""A failure does not wait behind a backlog: a pod OOM-killed while the rules are still working
through thousands of ordinary pod updates (a relist at cold start) is published on the
``urgent`` subject, folded in through the partition's urgent lane and its finding published
while the backlog is still pending; when the durable reaches the same event in stream order,
nothing is published twice."""

from __future__ import annotations

from datetime import timedelta

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from consumers.rules import CONSUMER
from controller.bus.publishing import Publisher
from controller.bus.streams import wait_until_consumed
from controller.contract.events import BusEvent, JobObserved
from controller.contract.settings import Settings
from controller.contract.subjects import URGENT, Topology, urgent
from controller.testing.drills import findings_on_bus
from controller.testing.events import T0, job, ref, terminated, worker
from controller.testing.waits import until
from tests.rules.replicas import counted, drop_buckets, replica, running

BACKLOG_JOBS = 400
WORKERS = 16


def relist() -> list[BusEvent]:
    """Running jobs with running workers: what a cold start publishes before anything fails."""
    events: list[BusEvent] = []
    for k in range(BACKLOG_JOBS):
        run = ref("team-a", f"busy-{k}", f"uid-busy-{k}")
        events.append(job("Running", job=run, observed_at=T0))
        events += [worker(i, job=run, uid=f"uid-busy-{k}-w{i}", observed_at=T0) for i in range(WORKERS)]
    return events


def oom_killed() -> tuple[JobObserved, BusEvent]:
    run = ref("team-b", "victim", "uid-victim")
    killed = worker(
        2,
        phase="Failed",
        ready=False,
        containers=(terminated("OOMKilled", 137),),
        job=run,
        uid="uid-victim-w2",
        observed_at=T0 + timedelta(minutes=10),
    )
    return job("Running", job=run, observed_at=T0), killed


def test_failures_take_the_urgent_subject_and_ordinary_updates_do_not(topology: Topology) -> None:
    started, killed = oom_killed()
    assert urgent(killed) and not urgent(started) and not urgent(relist()[1])
    assert topology.job_event(killed).endswith(f".team-b.victim.{URGENT}")
    assert topology.job_event(started).endswith(".team-b.victim.job")
    assert topology.job_partition(topology.job_event(killed), 2) == topology.job_partition(
        topology.job_event(started), 2
    )


async def test_an_oom_kill_is_found_while_the_backlog_is_still_pending(
    settings: Settings, topology: Topology, nats_client: NATS, js: JetStreamContext
) -> None:
    settings.consumer.rules_partitions = 1
    publisher = Publisher(js, topology)
    started, killed = oom_killed()
    rules = replica(settings, topology, nats_client, "only")
    try:
        async with running(rules):
            await publisher.publish([started, *relist()])
            await publisher.publish([killed])

            async def found() -> bool:
                return any(f.rule == "oom" for f in await findings_on_bus(js, topology))

            await until(found, 60, lambda: "no oom finding", 0.05)
            durable = await js.consumer_info(topology.stream("jobs"), topology.partition_durable(CONSUMER, 0))
            await wait_until_consumed(js, topology.stream("jobs"), topology.durable(CONSUMER), 120)
            findings = await findings_on_bus(js, topology)
    finally:
        await drop_buckets(js, topology)

    assert durable.num_pending > BACKLOG_JOBS, "the finding must come before the durable reached it"
    assert [f.rule for f in findings if f.job.uid == "uid-victim"] == ["oom"]
    assert all(n == 1 for n in counted(findings).values())
