"""Watch observations → real JetStream → history consumer → real PostgreSQL rows."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.publishing import Publisher
from controller.contract.events import Condition, JobObserved, PodObserved
from controller.store.history import apply_events
from controller.store.models import PodRow, PodStateRow, Run, TimelineEntryRow
from controller.testing import events as eb
from controller.testing.stories import oom_story
from tests.conftest import Stage
from tests.pipeline_fixtures import consumers_running


async def counts(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        return {
            model.__tablename__: (await conn.execute(select(func.count()).select_from(model))).scalar_one()
            for model in (Run, PodRow, PodStateRow, TimelineEntryRow)
        }


async def test_oom_story_lands_in_history(stage: Stage) -> None:
    story = oom_story()
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        published = await stage.feed(story)
        await stage.consumed()

    assert published == len(story)
    async with stage.engine.connect() as conn:
        run = (await conn.execute(select(Run))).one()
        assert (run.name, run.phase, run.attempt) == ("pi", "Failed", 1)
        assert run.spec["workers"] == 4 and run.spec["worker"]["resources"]["limits"]["memory"] == "16Gi"
        assert run.started_at is not None and run.finished_at is not None
        pods = {(p.role, p.index): p for p in (await conn.execute(select(PodRow))).all()}
        assert len(pods) == 5
        assert pods[("worker", 2)].phase == "Failed"
        assert pods[("worker", 2)].containers[0]["reason"] == "OOMKilled"
        summaries = (  # what the watch showed (the rules' finding may or may not be stored yet)
            (
                await conn.execute(
                    select(TimelineEntryRow.summary)
                    .where(TimelineEntryRow.source != "finding")
                    .order_by(TimelineEntryRow.at, TimelineEntryRow.id)
                )
            )
            .scalars()
            .all()
        )
    assert "worker-2 container worker terminated: OOMKilled (exit 137)" in summaries
    assert summaries[-1] == "MPIJob pi is Failed (MPIJobFailed)"
    assert any("Scheduled on Pod pi-worker-0" in s for s in summaries)


async def test_publishing_the_same_story_twice_adds_nothing(stage: Stage) -> None:
    story = oom_story()
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        first = await stage.feed(story)
        await stage.consumed()
        before = await counts(stage.engine)
        second = await stage.feed(story)
        await stage.consumed()
    assert (first, second) == (len(story), 0)  # JetStream collapsed every duplicate by Nats-Msg-Id
    assert await counts(stage.engine) == before


async def test_redelivered_batches_write_nothing_twice(stage: Stage) -> None:
    """Beyond the duplicate window (simulated by purging it), the store itself is idempotent."""
    story = oom_story()
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        await stage.feed(story)
        await stage.consumed()
        before = await counts(stage.engine)
        await stage.js.purge_stream(
            stage.topology.stream("jobs")
        )  # forgets message ids, as an expired window would
        await stage.js.update_stream(
            name=stage.topology.stream("jobs"),
            subjects=[stage.topology.wildcard("jobs")],
            duplicate_window=0.1,
        )
        again = 0
        for _ in range(100):  # the server forgets the ids on its own timer once the window is over
            await asyncio.sleep(0.1)
            again += await stage.feed(story)  # what it still remembers is refused again, harmlessly
            if again >= len(story):
                break
        await stage.consumed()
    assert again == len(story)
    assert await counts(stage.engine) == before


@pytest.mark.parametrize("order", ["forward", "reversed"], ids=["in-order", "out-of-order"])
async def test_state_never_regresses(
    order: str,
    stage: Stage,
) -> None:
    story = [o for o in oom_story() if o.kind == "job"]
    if order == "reversed":
        story = [story[0], *reversed(story[1:])]
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        for observation in story:  # one message per batch, so each arrives on its own
            await stage.feed([observation])
            await stage.consumed()
    async with stage.engine.connect() as conn:
        phase = (await conn.execute(text("SELECT phase FROM runs"))).scalar_one()
    assert phase == "Failed"


async def test_attempts_of_one_job_name_are_numbered_and_linked(stage: Stage) -> None:
    second = oom_story(created="2026-11-20T12:00:00Z")
    first = oom_story(created="2026-11-20T09:00:00Z")
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        # the later attempt is seen first: numbering must follow creation time, not arrival
        await stage.feed(second)
        await stage.feed(first)
        await stage.consumed()
    async with stage.engine.connect() as conn:
        rows = (
            await conn.execute(select(Run.uid, Run.attempt, Run.previous_uid).order_by(Run.created_at))
        ).all()
    assert [r.attempt for r in rows] == [1, 2]
    assert rows[0].previous_uid is None and rows[1].previous_uid == rows[0].uid


@pytest.mark.parametrize("batches", ["apart", "together"])
async def test_a_deletion_at_the_stored_version_marks_the_run_deleted_and_keeps_it(
    batches: str, engine: AsyncEngine
) -> None:
    """A watcher back from a restart tells a deletion it missed with the object's identity only
    (no spec, conditions or containers), at the version last published."""
    running = eb.job("Running", resource_version="5", conditions=[Condition(type="Running", status="True")])
    pod = eb.worker(0, resource_version="6")
    notices = [
        JobObserved(**running.model_dump(include=_JOB_IDENTITY), change="DELETED", observed_at=eb.at(9)),
        PodObserved(**pod.model_dump(include=_POD_IDENTITY), change="DELETED", observed_at=eb.at(9)),
    ]
    async with engine.begin() as conn:
        if batches == "apart":
            await apply_events(conn, [running, pod])
            await apply_events(conn, notices)
        else:
            await apply_events(conn, [running, pod, *notices])
    async with engine.connect() as conn:
        run = (await conn.execute(text("SELECT phase, spec, conditions, deleted_at FROM runs"))).one()
        pods = (await conn.execute(text("SELECT containers, deleted_at FROM pods"))).one()
    assert (run.phase, run.spec["workers"], run.deleted_at) == ("Running", 4, eb.at(9))
    assert [c["type"] for c in run.conditions] == ["Running"]
    assert pods.containers and pods.deleted_at == eb.at(9)


_JOB_IDENTITY = {"uid", "kind", "namespace", "name", "resource_version", "phase", "labels", "created_at"}
_POD_IDENTITY = {
    "job",
    "uid",
    "name",
    "namespace",
    "resource_version",
    "role",
    "index",
    "phase",
    "created_at",
}


async def test_output_read_live_is_taken_and_stores_nothing(stage: Stage) -> None:
    """The rules' log reader publishes ``LogSeen`` on the job's subject: the history takes it (no
    dead letter) and keeps nothing of it — log lines live on ``LOGS``, not in PostgreSQL."""
    seen = eb.log_seen("[1,3]<stderr>:torch.OutOfMemoryError: CUDA out of memory.", "[1,0]<stdout>:step 9")
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        await Publisher(stage.js, stage.topology).publish([seen])
        await stage.consumed()

    assert await counts(stage.engine) == {"runs": 0, "pods": 0, "pod_states": 0, "timeline": 0}
    assert (await stage.js.stream_info(stage.topology.stream("dlq"))).state.messages == 0
