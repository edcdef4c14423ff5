"""Two notify replicas share the durables, and killing one with SIGKILL mid-stream loses and repeats
no announcement: a job's newest observation announces every transition it implies, whichever
replica took the older ones, and findings are handed out one at a time, so each episode
(firing, resolved, firing again) is announced once, in order."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.notify import CONSUMER, FINDINGS_CONSUMER
from controller.bus.settling import consumer_config
from controller.bus.streams import wait_until_consumed
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.store.models import DeliveryRow
from controller.testing.drills import rows_in
from controller.testing.notify import (
    finding,
    job,
    subscribe,
    with_notify,
)
from controller.testing.processes import cli_env, start_cli
from controller.testing.receivers import Receiver
from tests.notify_fixtures import Notifying

pytestmark = pytest.mark.slow

JOBS = 120
STORY = ("job.created", "job.running", "job.succeeded")
EPISODES = ("finding.firing", "finding.resolved", "finding.firing", "finding.resolved")


def start_notify(settings: Settings, tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    """``consume --only notify`` in a process of its own; batches of two, so that a job's
    three observations always straddle two batches, which two replicas could take at once."""
    env = cli_env(settings, tmp_path, MPIJC_CONSUMER__BATCH_SIZE="2", MPIJC_CONSUMER__ACK_WAIT_S="2")
    return start_cli(["consume", "--only", "notify"], env, tmp_path, tmp_path / f"{name}.log")


async def announced(engine: AsyncEngine, prefix: str) -> dict[str, list[str]]:
    """Event types ``prefix…`` enqueued per job, in the order they were enqueued."""
    by_job: dict[str, list[str]] = defaultdict(list)
    async with engine.connect() as conn:
        rows = await conn.execute(
            select(DeliveryRow.job_uid, DeliveryRow.event_type)
            .where(DeliveryRow.event_type.startswith(prefix))
            .order_by(DeliveryRow.seq)
        )
        for uid, event_type in rows:
            by_job[uid].append(event_type)
    return by_job


async def both_waiting(js: JetStreamContext, topology: Topology) -> None:
    """Until both replicas have a pull request open on the jobs durable (they compete from the start)."""
    for _ in range(1500):
        with contextlib.suppress(NotFoundError):
            info = await js.consumer_info(topology.stream("jobs"), topology.durable(CONSUMER))
            if (info.num_waiting or 0) >= 2:
                return
        await asyncio.sleep(0.02)
    raise AssertionError("the two notify replicas did not start pulling")


async def test_replicas_announce_every_transition_once_in_order_through_a_kill(
    notifying: Notifying,
    tmp_path: Path,
) -> None:
    with_notify(notifying.settings)
    async with Receiver() as rx, notifying.api() as api:
        await subscribe(api, rx, "ci")
    stories = [
        event
        for k in range(JOBS)
        for event in (
            job("Pending", name=f"job-{k}", change="ADDED", resource_version=f"{10 * k + 1}"),
            job("Running", name=f"job-{k}", resource_version=f"{10 * k + 2}"),
            job("Succeeded", name=f"job-{k}", resource_version=f"{10 * k + 3}"),
        )
    ]
    ends = [event for event in stories if event.phase == "Succeeded"]
    episodes = [
        finding(of, status=status, revision=revision)
        for of in ends
        for revision, status in enumerate(("firing", "resolved", "firing", "resolved"), start=1)
    ]
    doomed = start_notify(notifying.settings, tmp_path, "doomed")
    survivor = start_notify(notifying.settings, tmp_path, "survivor")
    try:
        await both_waiting(notifying.js, notifying.topology)
        await notifying.publish(*stories)
        await notifying.publish_findings(*episodes)
        for _ in range(1200):  # until part of the stream is announced
            if await rows_in(notifying.engine, DeliveryRow) > len(stories) + len(episodes) // 4:
                break
            await asyncio.sleep(0.02)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(10)
        at_kill = await rows_in(notifying.engine, DeliveryRow)
        assert 0 < at_kill < len(stories) + len(episodes), "the kill must land mid-stream"
        await notifying.consumed(CONSUMER, timeout_s=90)
        await wait_until_consumed(
            notifying.js,
            notifying.topology.stream("findings"),
            notifying.topology.durable(FINDINGS_CONSUMER),
            timeout_s=90,
        )
    finally:
        for process in (doomed, survivor):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(20)
    assert survivor.returncode == 0, (tmp_path / "survivor.log").read_text()[-2000:]

    for prefix, expected in (("job.", STORY), ("finding.", EPISODES)):
        by_job = await announced(notifying.engine, prefix)
        wrong = {uid: types for uid, types in by_job.items() if tuple(types) != expected}
        assert len(by_job) == JOBS and not wrong, (
            f"{len(wrong)} jobs announced out of order or twice: {wrong}"
        )


async def test_the_findings_durable_of_an_earlier_version_is_made_ordered_keeping_its_place(
    notifying: Notifying,
) -> None:
    with_notify(notifying.settings)
    async with Receiver() as rx, notifying.api() as api:
        await subscribe(api, rx, "ci")
    stream, durable = notifying.topology.stream("findings"), notifying.topology.durable(FINDINGS_CONSUMER)
    old = consumer_config(notifying.settings.consumer)
    old.durable_name, old.filter_subject = durable, notifying.topology.wildcard("findings")
    await notifying.js.add_consumer(stream, old)  # as the version before this one declared it
    of = job("Failed", change="ADDED")
    await notifying.publish_findings(finding(of), finding(of, status="resolved", revision=2))

    async with notifying.consuming():
        await wait_until_consumed(notifying.js, stream, durable)
        info = await notifying.js.consumer_info(stream, durable)

    assert (old.max_ack_pending, info.config.max_ack_pending) == (
        max(notifying.settings.consumer.batch_size * 4, 1000),
        1,
    )
    assert info.delivered.consumer_seq == 2 and info.num_ack_pending == 0
    assert await announced(notifying.engine, "finding.") == {of.uid: ["finding.firing", "finding.resolved"]}
