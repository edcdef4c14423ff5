"""Jobs finishing or going away become audit records, once per run; every audit record lands in the chain.

Real JetStream and PostgreSQL: job observations on ``jobs.>`` → ``audit-lifecycle`` →
``audit.<ns>`` → ``audit`` → the hash-chained table.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.audit.consumer import CONSUMER, LIFECYCLE_CONSUMER, durables
from controller.bus.consuming import consuming
from controller.bus.publishing import Publisher
from controller.bus.streams import wait_until_consumed
from controller.contract.audit import AuditRecord, lifecycle_record
from controller.contract.events import Condition, JobObserved, JobRef
from controller.contract.subjects import Topology
from controller.store.auditverification import verify
from controller.store.models import AuditRow
from controller.testing.events import at, job
from tests.audit_helpers import T0, audit_record
from tests.conftest import Stage

PI = JobRef(uid="uid-pi", kind="MPIJob", namespace="team-a", name="pi")
BERT = JobRef(uid="uid-bert", kind="TrainJob", namespace="team-b", name="bert")
FAILED = Condition(type="Failed", status="True", reason="MPIJobFailed", message="pi-worker-2 was OOMKilled")
SUCCEEDED = Condition(
    type="Succeeded", status="True", reason="MPIJobSucceeded", message="MPIJob team-a/pi done"
)
COMPLETE = Condition(type="Complete", status="True", reason="JobSetCompleted", message="jobset completed")


@contextlib.asynccontextmanager
async def audit_consumer(stage: Stage, nats_client: NATS) -> AsyncIterator[None]:
    async with consuming(
        nats_client,
        stage.topology,
        stage.settings.consumer,
        durables(stage.topology, stage.engine, stage.js, lambda: T0),
        stage.metrics,
    ):
        yield


async def caught_up(js: JetStreamContext, topology: Topology) -> None:
    await wait_until_consumed(js, topology.stream("jobs"), topology.durable(LIFECYCLE_CONSUMER), 20)
    await wait_until_consumed(js, topology.stream("audit"), topology.durable(CONSUMER), 20)


async def stored(engine: AsyncEngine) -> dict[str, AuditRecord]:
    async with engine.connect() as conn:
        rows = (await conn.execute(select(AuditRow.event_id, AuditRow.record).order_by(AuditRow.seq))).all()
    return {event_id: AuditRecord.model_validate(record) for event_id, record in rows}


def test_lifecycle_records_name_the_outcome_and_its_reason() -> None:
    failed = lifecycle_record(job("Failed", job=PI, conditions=[FAILED], observed_at=at(30)))
    assert failed is not None
    assert (failed.id, failed.verb, failed.outcome) == ("uid-pi/failed", "failed", "Failed")
    assert (failed.reason, failed.message) == ("MPIJobFailed", "pi-worker-2 was OOMKilled")
    assert failed.object is not None and (failed.object.uid, failed.object.api_group) == (
        "uid-pi",
        "kubeflow.org",
    )
    assert failed.actor is None

    complete = lifecycle_record(job("Succeeded", job=BERT, conditions=[COMPLETE]))
    assert complete is not None and (complete.verb, complete.reason) == ("completed", "JobSetCompleted")
    assert complete.object is not None and complete.object.api_group == "trainer.kubeflow.org"

    gone = lifecycle_record(job("Running", job=PI, change="DELETED"))
    assert gone is not None and (gone.id, gone.verb, gone.outcome) == ("uid-pi/deleted", "deleted", "Running")

    assert lifecycle_record(job("Running", job=PI)) is None


async def test_one_failed_record_per_run_however_often_it_is_seen(
    stage: Stage,
    nats_client: NATS,
) -> None:
    events: list[JobObserved] = [
        job("Running", job=PI, observed_at=at(1)),
        job("Failed", job=PI, conditions=[FAILED], observed_at=at(30)),
        job("Failed", job=PI, conditions=[FAILED], observed_at=at(31)),  # another update of a failed job
        job("Failed", job=PI, conditions=[FAILED], observed_at=at(40), change="ADDED"),  # a relist
        job("Failed", job=PI, conditions=[FAILED], observed_at=at(50), change="DELETED"),
        job("Succeeded", job=BERT, conditions=[COMPLETE], observed_at=at(20)),
        job("Succeeded", job=BERT, conditions=[COMPLETE], observed_at=at(21)),
    ]
    async with audit_consumer(stage, nats_client):
        await Publisher(stage.js, stage.topology).publish(events)
        await caught_up(stage.js, stage.topology)
        # the same record again, after JetStream's duplicate window (no Nats-Msg-Id): the table drops it
        again = lifecycle_record(events[1])
        assert again is not None
        await stage.js.publish(stage.topology.audit("team-a"), again.model_dump_json().encode())
        await caught_up(stage.js, stage.topology)

    records = await stored(stage.engine)
    assert sorted(records) == ["uid-bert/completed", "uid-pi/deleted", "uid-pi/failed"]
    failed = records["uid-pi/failed"]
    assert (failed.reason, failed.message, failed.namespace) == (
        "MPIJobFailed",
        "pi-worker-2 was OOMKilled",
        "team-a",
    )
    assert records["uid-pi/deleted"].outcome == "Failed"
    assert records["uid-bert/completed"].namespace == "team-b"
    assert (await verify(stage.engine)).ok
    async with stage.engine.connect() as conn:  # what admission records are corroborated against
        changes = (await conn.execute(text("SELECT name, change FROM watch_changes"))).all()
    assert sorted(set(changes)) == [
        ("bert", "MODIFIED"),
        ("pi", "ADDED"),
        ("pi", "DELETED"),
        ("pi", "MODIFIED"),
    ]


async def test_admission_records_on_the_bus_are_chained_once(
    stage: Stage,
    nats_client: NATS,
) -> None:
    records = [audit_record(n, namespace=ns) for n, ns in enumerate(["team-a", "team-b", "team-a"], 1)]
    async with audit_consumer(stage, nats_client):
        assert await Publisher(stage.js, stage.topology).publish_records(records) == 3
        assert await Publisher(stage.js, stage.topology).publish_records(records[:1]) == 0, (
            "JetStream drops the repeat"
        )
        await caught_up(stage.js, stage.topology)

    assert list(await stored(stage.engine)) == ["test/1", "test/2", "test/3"]
    async with stage.engine.connect() as conn:
        rows = (
            await conn.execute(select(AuditRow.namespace, AuditRow.username).order_by(AuditRow.seq))
        ).all()
    assert [tuple(r) for r in rows] == [
        ("team-a", "alice@example.com"),
        ("team-b", "alice@example.com"),
        ("team-a", "alice@example.com"),
    ]
    assert (await verify(stage.engine)).ok
    assert stage.metrics.registry.get_sample_value("mpijc_consumed_total", {"consumer": CONSUMER}) == 3
