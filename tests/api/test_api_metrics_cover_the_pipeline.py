"""/metrics (on the metrics port): jobs by phase, run durations and findings from the store; JetStream backlog; DB writes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import httpx
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import StaticAccess
from controller.api.app import create_app, metrics_app
from controller.api.metrics_collectors import JetStreamCollector, ScrapeCollector
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store.timing import observe_db_writes
from tests.api_fixtures import T0, USERS, fire, insert_runs, run_row

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def scrape(app_client: httpx.AsyncClient) -> Samples:
    response = await app_client.get("/metrics")
    assert response.status_code == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def client_of(
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    collectors: Sequence[ScrapeCollector] = (),
    metrics_ttl_s: float = 0,
) -> httpx.AsyncClient:
    app = create_app(engine, metrics, StaticAccess(USERS), collectors=collectors, metrics_ttl_s=metrics_ttl_s)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=metrics_app(app)), base_url="http://metrics")


async def test_store_figures_come_from_the_database(engine: AsyncEngine) -> None:
    rows = [
        run_row("team-a", "a", T0, phase="Succeeded"),  # 600 s
        run_row("team-a", "b", T0, phase="Failed"),
        run_row("team-a", "c", T0, phase="Running"),
        run_row("team-b", "d", T0, kind="TrainJob", phase="Running"),
        run_row("team-b", "e", T0, phase="Succeeded"),
    ]
    rows[4]["finished_at"] = T0 + timedelta(hours=2)  # 7,200 s
    rows[1]["deleted_at"] = T0 + timedelta(hours=1)  # gone from the cluster: no longer a "job", still a run
    await insert_runs(engine, rows)
    await fire(engine, str(rows[1]["uid"]), "team-a", "b", "oom", "out of memory", T0)

    async with client_of(engine, PipelineMetrics(), metrics_ttl_s=3600) as client:
        samples = await scrape(client)
        await insert_runs(engine, [run_row("team-a", "late", T0, phase="Running")])
        assert await scrape(client) == samples  # reused within the TTL

    def jobs(namespace: str, kind: str, phase: str) -> float | None:
        return samples.get(("mpijc_jobs", (("kind", kind), ("namespace", namespace), ("phase", phase))))

    assert jobs("team-a", "MPIJob", "Running") == 1
    assert jobs("team-b", "TrainJob", "Running") == 1
    assert jobs("team-a", "MPIJob", "Failed") is None  # deleted
    ok = (("kind", "MPIJob"), ("outcome", "Succeeded"))
    assert samples[("mpijc_run_duration_seconds_count", ok)] == 2
    assert samples[("mpijc_run_duration_seconds_sum", ok)] == 7800
    assert samples[("mpijc_run_duration_seconds_bucket", (*ok[:1], ("le", "900.0"), *ok[1:]))] == 1
    assert samples[("mpijc_run_duration_seconds_bucket", (*ok[:1], ("le", "7200.0"), *ok[1:]))] == 2
    assert samples[("mpijc_run_duration_seconds_count", (("kind", "MPIJob"), ("outcome", "Failed")))] == 1
    firing = (("rule", "oom"), ("severity", "critical"), ("status", "firing"))
    assert samples[("mpijc_findings", firing)] == 1
    assert samples[("mpijc_scrape_ok", (("source", "database"),))] == 1


async def test_jetstream_backlog_per_consumer(
    engine: AsyncEngine, js: JetStreamContext, topology: Topology
) -> None:
    stream = topology.stream("jobs")
    await js.add_consumer(
        stream, ConsumerConfig(durable_name=topology.durable("history"), ack_policy=AckPolicy.EXPLICIT)
    )
    for i in range(3):
        await js.publish(f"{topology.wildcard('jobs')[:-1]}team-a.pi.job", f"m{i}".encode())
    metrics = PipelineMetrics()
    collector = JetStreamCollector(js, topology, metrics.registry, ttl_s=0)
    async with client_of(engine, metrics, collectors=[collector]) as client:
        samples = await scrape(client)
    consumer = (("consumer", topology.durable("history")), ("stream", stream))
    assert samples[("mpijc_jetstream_consumer_pending", consumer)] == 3
    assert samples[("mpijc_jetstream_consumer_ack_pending", consumer)] == 0
    assert samples[("mpijc_jetstream_consumer_redelivered", consumer)] == 0
    assert samples[("mpijc_jetstream_stream_messages", (("stream", stream),))] == 3
    assert samples[("mpijc_scrape_ok", (("source", "jetstream"),))] == 1


async def test_database_writes_are_timed(engine: AsyncEngine) -> None:
    metrics = PipelineMetrics()
    observe_db_writes(engine, metrics)
    await insert_runs(engine, [run_row("team-a", "a", T0)])
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))
    assert metrics.registry.get_sample_value("mpijc_db_write_seconds_count", {"statement": "INSERT"}) == 1
    assert metrics.registry.get_sample_value("mpijc_db_write_seconds_count", {"statement": "SELECT"}) is None


async def test_a_failing_source_keeps_serving(engine: AsyncEngine) -> None:
    await insert_runs(engine, [run_row("team-a", "a", T0, phase="Running")])
    async with client_of(engine, PipelineMetrics(), metrics_ttl_s=0) as client:
        assert (await scrape(client))[("mpijc_scrape_ok", (("source", "database"),))] == 1
        async with engine.begin() as conn:
            await conn.execute(text("ALTER TABLE runs RENAME TO runs_gone"))
        samples = await scrape(client)
    assert samples[("mpijc_scrape_ok", (("source", "database"),))] == 0
    assert any(name == "mpijc_jobs" for name, _ in samples)  # the previous figures
