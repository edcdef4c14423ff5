"""Findings on ``findings.>`` land in PostgreSQL: newest revision wins, every change on the timeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from nats.js import JetStreamContext
from sqlalchemy import select

from controller.bus.streams import wait_until_consumed
from controller.contract.events import JobRef
from controller.contract.findings import Evidence, Finding, dedup_key, doc_anchor, finding_id, message_id
from controller.contract.subjects import Topology
from controller.store.models import FindingRow, TimelineEntryRow
from tests.conftest import Stage
from tests.pipeline_fixtures import consumers_running

JOB = JobRef(uid="5d0f6a43-6f7e-4b7c-9a43-2f3c1e0b9d21", kind="MPIJob", namespace="team-a", name="pi")
T0 = datetime(2026, 11, 20, 10, 10, tzinfo=UTC)


def oom(revision: int, status: str = "firing") -> Finding:
    return Finding(
        id=finding_id(JOB.uid, "oom"),
        rule="oom",
        severity="critical",
        status=status,  # type: ignore[arg-type]
        job=JOB,
        root_cause="Worker 2 failed: out of memory (limit 16Gi)",
        evidence=(
            Evidence(
                source="pod/pi-worker-2",
                field="containers[worker].state.terminated.reason",
                value="OOMKilled",
            ),
        ),
        remediation=("Increase the worker memory limit", "Reduce the per-rank batch size"),
        doc_anchor=doc_anchor("oom"),
        dedup_key=dedup_key(JOB.uid, "oom"),
        revision=revision,
        first_seen=T0,
        last_seen=T0 + timedelta(seconds=revision),
        resolved_at=T0 + timedelta(minutes=5) if status == "resolved" else None,
    )


async def publish(js: JetStreamContext, topology: Topology, finding: Finding) -> None:
    await js.publish(
        topology.finding(JOB.namespace, JOB.name, finding.rule),
        finding.model_dump_json().encode(),
        headers={"Nats-Msg-Id": message_id(finding)},
    )


async def test_latest_revision_is_stored_and_each_change_is_on_the_timeline(stage: Stage) -> None:
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        for finding in (oom(1), oom(3, "resolved"), oom(2)):  # revision 2 arrives late
            await publish(stage.js, stage.topology, finding)
        await wait_until_consumed(
            stage.js, stage.topology.stream("findings"), stage.topology.durable("history-findings")
        )

    async with stage.engine.connect() as conn:
        row = (await conn.execute(select(FindingRow))).one()
        timeline = (
            (
                await conn.execute(
                    select(TimelineEntryRow.summary)
                    .where(TimelineEntryRow.source == "finding")
                    .order_by(TimelineEntryRow.at)
                )
            )
            .scalars()
            .all()
        )
    assert (row.rule, row.status, row.revision, row.run_uid) == ("oom", "resolved", 3, JOB.uid)
    assert row.evidence == [
        {
            "source": "pod/pi-worker-2",
            "field": "containers[worker].state.terminated.reason",
            "value": "OOMKilled",
        }
    ]
    assert len(timeline) == 3
    assert timeline[0] == "Finding oom (critical): Worker 2 failed: out of memory (limit 16Gi)"
    assert timeline[-1].startswith("Finding oom (resolved)")
