"""Three ``nats-server`` processes as a JetStream cluster, streams and buckets with three replicas:
SIGKILL of the server that leads the JOBS stream in the middle of a burst loses no event, no
finding and no webhook, repeats no finding, and the watcher pipeline and the consumer process
carry on without a restart."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.publishing import Publisher
from controller.bus.streams import connect, ensure_streams, wait_until_consumed
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store.models import FindingRow, PodState, Run
from controller.testing.natscluster import NatsCluster
from controller.testing.notify import api_client, subscribe, with_notify
from controller.testing.processes import cli_env, start_cli
from controller.testing.receivers import Receiver
from controller.testing.stories import oom_story
from controller.testing.waits import until
from tests.rules.replicas import counted, findings_on_bus
from watchers.pipeline import Pipeline

pytestmark = pytest.mark.slow

JOBS = 40
EXPECTED = (("job.failed", ""), ("finding.firing", "oom"))  # per job, among the webhooks


async def count(engine: AsyncEngine, model: type[Run] | type[PodState]) -> int:
    async with engine.connect() as conn:
        return (await conn.execute(select(func.count()).select_from(model))).scalar_one()


async def stored(engine: AsyncEngine, model: type[PodState]) -> bool:
    return await count(engine, model) > 0


async def oom_findings(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        query = select(func.count()).select_from(FindingRow).where(FindingRow.rule == "oom")
        return (await conn.execute(query)).scalar_one()


def start_consumers(settings: Settings, tmp_path: Path) -> subprocess.Popen[bytes]:
    """Every consumer role in one ``consume`` process, given all three servers."""
    env = cli_env(
        settings,
        tmp_path,
        MPIJC_NATS__REPLICAS="3",
        MPIJC_CONSUMER__BATCH_SIZE="20",
        MPIJC_CONSUMER__ACK_WAIT_S="3",
        MPIJC_CONSUMER__RULES_LEASE_TTL_S="3",
        MPIJC_NOTIFY__ALLOW_CIDRS='["127.0.0.0/8"]',
        MPIJC_NOTIFY__POLL_INTERVAL_S="0.1",
    )
    return start_cli(["consume"], env, tmp_path, tmp_path / "consume.log")


async def test_killing_the_jobs_stream_leader_mid_burst_loses_and_repeats_nothing(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics, tmp_path: Path
) -> None:
    stories = [oom_story(name=f"job-{i}", workers=3) for i in range(JOBS)]
    observations = [o for story in stories for o in story]
    half = len(observations) // 2
    with NatsCluster(tmp_path / "nats") as cluster:
        settings.nats = NatsSettings(url=cluster.url, prefix=settings.nats.prefix, replicas=3)
        topology = Topology(settings.nats.prefix)
        nc: NATS = await connect(cluster.url, "drill-watcher")
        js = nc.jetstream()
        await ensure_streams(js, topology, settings.nats)
        with_notify(settings)
        rx = Receiver()
        async with rx, api_client(settings, engine, metrics) as api:
            await subscribe(api, rx, "ci", event_types=["job.failed", "finding.firing"])
            consumers = start_consumers(settings, tmp_path)
            try:
                log = tmp_path / "consume.log"
                await until(
                    lambda: "consumers running" in log.read_text(), 60, lambda: log.read_text()[-2000:]
                )
                pipeline = Pipeline(Publisher(js, topology).publish, metrics, 5)
                await pipeline.feed(observations[:half])
                await until(
                    lambda: stored(engine, PodState), 60, lambda: "the first half never reached the history"
                )
                leader = cluster.leader_of(topology.stream("jobs"))
                cluster.kill(leader)  # mid-burst: the consumers are still working through the first half
                await pipeline.feed(observations[half:])  # retried until a new leader answers
                for durable in ("history", "notify", "audit-lifecycle"):
                    await wait_until_consumed(js, topology.stream("jobs"), topology.durable(durable), 120)
                await wait_until_consumed(js, topology.stream("jobs"), topology.durable("rules"), 120)
                expected = {(kind, f"job-{i}", rule) for i in range(JOBS) for kind, rule in EXPECTED}
                await until(lambda: expected <= set(delivered(rx)), 120, lambda: "webhooks missing", 0.05)
                await asyncio.sleep(1)  # a late duplicate delivery would arrive now
                survived = consumers.poll() is None
                findings = await findings_on_bus(js, topology)
            finally:
                consumers.send_signal(signal.SIGTERM)
                consumers.wait(30)
        await nc.close()

    log = (tmp_path / "consume.log").read_text()[-3000:]
    assert survived and consumers.returncode == 0, log
    assert await count(engine, Run) == JOBS
    assert await count(engine, PodState) == sum(1 for o in observations if o.kind == "pod")
    assert await oom_findings(engine) == JOBS
    repeated = {key: n for key, n in counted(findings).items() if n > 1}
    assert not repeated, f"finding changes published twice: {repeated}"
    assert {f.job.name for f in findings if f.rule == "oom"} == {f"job-{i}" for i in range(JOBS)}
    webhook_ids = delivered(rx)
    expected = {(kind, f"job-{i}", rule) for i in range(JOBS) for kind, rule in EXPECTED}
    assert expected <= set(webhook_ids), f"never delivered: {sorted(expected - set(webhook_ids))[:5]}"
    assert all(len(ids) == 1 for ids in webhook_ids.values()), "a webhook re-sent under a new id"


def delivered(rx: Receiver) -> dict[tuple[str, str, str], set[str]]:
    """Webhook ids received per (event type, job, rule of the finding); each one signed."""
    webhook_ids: dict[tuple[str, str, str], set[str]] = defaultdict(set)
    for request in rx.at("ci"):
        assert request.verified, request.error
        body = request.payload
        rule = (body["data"].get("finding") or {}).get("rule", "")
        webhook_ids[(body["type"], body["data"]["job"]["name"], rule)].add(request.webhook_id)
    return webhook_ids
