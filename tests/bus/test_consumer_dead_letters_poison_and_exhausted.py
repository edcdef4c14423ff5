"""Bad input loses nothing: poison goes to ``dlq.history`` (counted), good messages still land,
and a database outage is retried, then dead-lettered when it outlasts ``max_deliver``."""

from __future__ import annotations

import asyncio

from nats.js import JetStreamContext
from sqlalchemy import func, select

from controller.bus.publishing import Publisher
from controller.contract.events import DeadLetter
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from controller.store.models import Run
from controller.testing.ports import free_port
from controller.testing.stories import oom_story
from tests.conftest import Stage
from tests.pipeline_fixtures import consumers_running
from watchers.pipeline import Pipeline


async def dead_letters(js: JetStreamContext, topology: Topology, expected: int) -> list[DeadLetter]:
    sub = await js.pull_subscribe(topology.dead_letter("history"), stream=topology.stream("dlq"))
    letters: list[DeadLetter] = []
    while len(letters) < expected:
        msgs = await sub.fetch(expected - len(letters), timeout=10)
        letters += [DeadLetter.model_validate_json(m.data) for m in msgs]
    await sub.unsubscribe()
    return letters


def count(metrics: PipelineMetrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "mpijc_dead_letters_total", {"consumer": "history", "reason": reason}
    )
    return value or 0.0


async def test_poison_messages_are_dead_lettered_and_good_ones_stored(stage: Stage) -> None:
    subject = f"{stage.topology.prefix}.jobs.team-a.pi.job"
    poison = [
        b"not json at all",
        b'{"schema_version": 1, "type": "job", "uid": "x"}',
        b'{"type": "sculpture"}',
    ]
    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        for payload in poison[:2]:
            await stage.js.publish(subject, payload)
        await stage.feed(oom_story())
        await stage.js.publish(subject, poison[2])
        await stage.consumed()

    letters = await dead_letters(stage.js, stage.topology, 3)
    assert sorted(letter.payload.encode() for letter in letters) == sorted(poison)
    assert all(letter.consumer == "history" and letter.subject == subject for letter in letters)
    assert all("undecodable payload" in letter.error for letter in letters)
    assert count(stage.metrics, "poison") == 3
    async with stage.engine.connect() as conn:
        assert (await conn.execute(select(Run.phase))).scalar_one() == "Failed"


async def test_database_outage_is_retried_then_dead_lettered(stage: Stage) -> None:
    unreachable = make_engine(f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere")
    story = oom_story()[:3]
    async with consumers_running(stage.settings, stage.topology, unreachable, stage.metrics):
        await Pipeline(Publisher(stage.js, stage.topology).publish, stage.metrics, 5).feed(story)
        letters = await dead_letters(stage.js, stage.topology, len(story))
    await unreachable.dispose()

    assert len(letters) == len(story)
    assert all(letter.deliveries == stage.settings.consumer.max_deliver for letter in letters)
    assert all("still failing after 3 deliveries" in letter.error for letter in letters)
    assert count(stage.metrics, "exhausted") == len(story)
    redelivered = stage.metrics.registry.get_sample_value("mpijc_redeliveries_total", {"consumer": "history"})
    assert redelivered == len(story) * (stage.settings.consumer.max_deliver - 1)


async def test_messages_survive_an_outage_shorter_than_the_retry_budget(stage: Stage) -> None:
    """Nacked during the outage, the same messages land once the database is back."""
    unreachable = make_engine(f"postgresql://postgres@127.0.0.1:{free_port()}/nowhere")
    stage.settings.consumer.max_deliver = 50
    async with consumers_running(stage.settings, stage.topology, unreachable, stage.metrics):
        await stage.feed(oom_story())
        await asyncio.sleep(0.5)  # a few failed deliveries
    await unreachable.dispose()
    assert (
        stage.metrics.registry.get_sample_value("mpijc_redeliveries_total", {"consumer": "history"}) or 0
    ) > 0

    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        await stage.consumed()
    async with stage.engine.connect() as conn:
        assert (await conn.execute(select(func.count()).select_from(Run))).scalar_one() == 1
    assert count(stage.metrics, "exhausted") == 0
