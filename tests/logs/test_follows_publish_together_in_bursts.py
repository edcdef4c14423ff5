"""What many follows publish in one turn of the event loop goes out as one burst, each batch still
stored only right after its own container's last one and answered on its own: one follow
superseded, one cancelled or one whose first try failed changes nothing for the others. A
batch's JSON written from its container's head made once is the model's own. Real NATS."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import pytest
from nats.js import JetStreamContext
from nats.js.api import PubAck

from controller.bus import publishing
from controller.bus.logstore import SupersededError, publish_after, stored_end
from controller.bus.publishing import Bursts, Outgoing
from controller.contract.logs import LogBatch, LogPosition, PackedBatch
from controller.contract.settings import Settings
from controller.contract.subjects import Topology

S = 10**9
Answered = Callable[[int, PubAck | BaseException], None] | None


def head(container: str, ts: int, **fields: object) -> LogBatch:
    values: dict[str, object] = {
        "run_uid": "u",
        "kind": "MPIJob",
        "namespace": "team-a",
        "job": "j",
        "pod": "j-worker-0",
        "pod_uid": "p-uid",
        "container": container,
        "role": "worker",
        "index": 0,
        "position": LogPosition(ts=ts, ties=1, stored_bytes=ts),
    }
    return LogBatch.model_validate({**values, **fields})


def packed(topology: Topology, container: str, ts: int) -> PackedBatch:
    batch = head(container, ts)
    lines = f'{{"ts":{ts},"text":"line {ts} of {container}"}}'.encode()
    subject = topology.log_subject("team-a", "j", "u", "j-worker-0", container)
    return PackedBatch(batch, lines, 1, PackedBatch.prefix_of(batch), subject)


Results = list[PubAck | BaseException]
Publish = Callable[[Answered], Awaitable[Results]]
"""The burst in hand published, each result told to the ``answered`` given."""
Step = Callable[[Sequence[Outgoing], Answered, Publish], Awaitable[Results]]


def around_publish(monkeypatch: pytest.MonkeyPatch, step: Step) -> None:
    """Runs ``step`` in place of each :func:`publishing.publish`: it is handed the burst, the
    caller's ``answered`` and a call that publishes the burst with the ``answered`` it chooses."""
    publish = publishing.publish

    async def around(
        js: JetStreamContext,
        messages: Sequence[Outgoing],
        ack_timeout_s: float = 5.0,
        answered: Answered = None,
    ) -> Results:
        return await step(messages, answered, lambda told: publish(js, messages, ack_timeout_s, told))

    monkeypatch.setattr(publishing, "publish", around)


@pytest.fixture
def bursts_seen(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each burst :func:`publishing.publish` is handed."""
    seen: list[int] = []

    async def counted(messages: Sequence[Outgoing], answered: Answered, publish: Publish) -> Results:
        seen.append(len(messages))
        return await publish(answered)

    around_publish(monkeypatch, counted)
    return seen


async def test_batches_of_many_containers_go_out_in_one_burst_each_after_its_own_last(
    js: JetStreamContext, topology: Topology, settings: Settings, bursts_seen: list[int]
) -> None:
    retry_s = settings.nats.publish_retry_s
    bursts = Bursts(js, retry_s)
    containers = [f"c{i}" for i in range(5)]

    async def store(container: str, ts: int, after: int) -> int:
        return await publish_after(
            js, topology, [packed(topology, container, ts)], after, retry_s, None, bursts
        )

    firsts = await asyncio.gather(*(store(c, 1 * S, 0) for c in containers))
    assert bursts_seen == [5]
    # the next turn: c0 was superseded meanwhile (it still thinks its subject empty), the rest go on
    results = await asyncio.gather(
        store("c0", 2 * S, 0),
        *(store(c, 2 * S, seq) for c, seq in zip(containers[1:], firsts[1:], strict=True)),
        return_exceptions=True,
    )
    assert bursts_seen == [5, 5]
    assert isinstance(results[0], SupersededError)
    assert all(isinstance(seq, int) and seq > max(firsts) for seq in results[1:])
    ends = [await stored_end(js, topology, "team-a", "j", "u", "j-worker-0", c) for c in containers]
    assert [end.position.ts for end in ends] == [1 * S] + [2 * S] * 4
    await bursts.close()


async def test_a_cancelled_publisher_leaves_the_others_of_its_burst_answered(
    js: JetStreamContext, topology: Topology, settings: Settings, bursts_seen: list[int]
) -> None:
    bursts = Bursts(js, settings.nats.publish_retry_s)
    messages = [publishing_outgoing(topology, c) for c in ("a", "b", "c")]
    tasks = [asyncio.create_task(bursts.publish(message)) for message in messages]
    await asyncio.sleep(0)  # all three handed over in this turn
    tasks[1].cancel()
    done = await asyncio.gather(*tasks, return_exceptions=True)
    assert bursts_seen == [3]
    assert isinstance(done[1], asyncio.CancelledError)
    assert isinstance(done[0], PubAck) and isinstance(done[2], PubAck)
    await bursts.close()


async def test_a_message_whose_first_try_failed_is_published_again_alone(
    js: JetStreamContext, topology: Topology, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    tries: list[list[str]] = []

    async def second_lost(messages: Sequence[Outgoing], answered: Answered, publish: Publish) -> Results:
        tries.append([message.subject.rsplit(".", 1)[-1] for message in messages])
        first = len(tries) == 1

        def told(index: int, result: PubAck | BaseException) -> None:
            if answered is not None and not (first and index == 1):
                answered(index, result)

        results = await publish(told)
        if first:
            results[1] = TimeoutError("no ack")  # as an ack lost with a killed server
        return results

    around_publish(monkeypatch, second_lost)
    retry_s = settings.nats.publish_retry_s
    bursts = Bursts(js, retry_s)
    seqs = await asyncio.gather(
        *(
            publish_after(js, topology, [packed(topology, c, S)], 0, retry_s, None, bursts)
            for c in ("a", "b", "c")
        )
    )
    assert tries == [["a", "b", "c"], ["b"]]
    # "b" was stored by its first try (its ack was what got lost): found stored, once
    ends = [await stored_end(js, topology, "team-a", "j", "u", "j-worker-0", c) for c in ("a", "b", "c")]
    assert [end.seq for end in ends] == seqs and len(set(seqs)) == 3
    info = await js.stream_info(topology.stream("logs"))
    assert info.state.messages == 3
    await bursts.close()


def publishing_outgoing(topology: Topology, container: str) -> Outgoing:
    batch = packed(topology, container, S)
    return Outgoing(batch.subject, batch.payload(), batch.head.msg_id, 0)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"role": "launcher", "index": None},
        {"kind": None, "pod_uid": None, "role": None, "index": None},
        {"namespace": 'quo"te\\d', "pod": "ünïcode"},
    ],
    ids=["worker", "launcher", "older-follower", "escapes"],
)
@pytest.mark.parametrize(
    "position",
    [
        LogPosition(),
        LogPosition(ts=5 * S + 7, ties=3, stored_bytes=99),
        LogPosition(ts=5 * S, ties=1, stored_bytes=10, key_lines=2),
        LogPosition(ts=5 * S, ties=1, stored_bytes=10, capped=True),
        LogPosition(ts=5 * S, ties=2, stored_bytes=10, capped=True, key_lines=1),
    ],
    ids=["start", "usual", "key-block", "capped", "every-field"],
)
@pytest.mark.parametrize(
    "lines", [b"", b'{"ts":5000000007,"rank":3,"text":"a"},{"ts":5000000007,"text":"b"}']
)
def test_a_batch_written_from_its_containers_head_is_the_models_json(
    fields: dict[str, object], position: LogPosition, lines: bytes
) -> None:
    template = head("c", 0, **fields)
    batch = template.model_copy(update={"position": position})
    count = lines.count(b'{"ts"')
    fast = PackedBatch(batch, lines, count, PackedBatch.prefix_of(template), "subject").payload()
    assert fast == PackedBatch(batch, lines, count).payload()
    noted = batch.model_copy(update={"note": "log cap reached"})  # a note comes after the position
    assert PackedBatch(noted, lines, count, PackedBatch.prefix_of(template)).payload() == (
        PackedBatch(noted, lines, count).payload()
    )
    assert LogBatch.model_validate_json(fast).position == position


async def test_each_publisher_is_answered_at_its_own_ack_not_the_bursts_last(
    js: JetStreamContext, topology: Topology, settings: Settings, bursts_seen: list[int]
) -> None:
    silent = f"{topology.prefix}.silent"  # taken by a subscriber that never answers: no ack comes
    sub = await js._nc.subscribe(silent)
    bursts = Bursts(js, settings.nats.publish_retry_s, ack_timeout_s=600.0)
    stored = asyncio.create_task(bursts.publish(publishing_outgoing(topology, "a")))
    unanswered = asyncio.create_task(bursts.publish(Outgoing(silent, b"x")))
    done, _ = await asyncio.wait({stored}, timeout=30.0)  # far under the burst's 600 s
    assert bursts_seen == [2]
    assert stored in done and isinstance(stored.result(), PubAck)
    assert not unanswered.done()
    await bursts.close()
    assert unanswered.cancelled()
    await sub.unsubscribe()
