"""The consuming door runs an owner's share of a durable and a lane, so no role pulls or acks:

- a :class:`Share` reads only what its filter keeps, with how far each batch reached; the others
  are acknowledged unread, and a batch with nothing kept is reported as passed;
- a lane acknowledges every message whatever comes of it: an apply that fails is not retried,
  a payload that does not decode is not dead-lettered (the durable behind the lane does both)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from controller.bus.client import NATS
from controller.bus.consuming import Durable, Share, consuming
from controller.bus.streams import wait_until_consumed
from tests.conftest import Stage


def decode(data: bytes) -> int:
    return int(json.loads(data))


async def test_a_share_reads_its_owners_messages_and_acknowledges_the_others(
    stage: Stage,
    nats_client: NATS,
) -> None:
    kept: list[int] = []
    reached: list[int] = []

    def mine(subject: str, sequence: int) -> bool:
        return ".team-a." in subject

    async def apply(items: Sequence[int], upto: int) -> None:
        kept.extend(items)
        reached.append(upto)

    async def passed(upto: int) -> None:
        reached.append(upto)

    name = stage.topology.durable("shared_p0")
    share = Durable("jobs", "shared", decode, share=Share(mine, apply, passed), name=name)
    async with consuming(nats_client, stage.topology, stage.settings.consumer, [share], stage.metrics):
        last = 0
        for i in range(30):
            namespace = "team-a" if i % 3 == 0 else "team-b"
            last = (
                await stage.js.publish(f"{stage.topology.prefix}.jobs.{namespace}.j{i}.job", str(i).encode())
            ).seq
        await wait_until_consumed(stage.js, stage.topology.stream("jobs"), name, timeout_s=20)

    assert kept == list(range(0, 30, 3))
    assert max(reached) == last
    assert reached == sorted(reached)


async def test_a_lane_acknowledges_what_fails_and_what_does_not_decode(
    stage: Stage,
    nats_client: NATS,
) -> None:
    tried: list[int] = []

    async def apply(items: Sequence[int], upto: int) -> None:
        tried.extend(items)
        raise RuntimeError("the durable behind will do it")

    name = stage.topology.durable("lane")
    urgent = f"{stage.topology.prefix}.jobs.*.*.urgent"
    lane = Durable(
        "jobs", "lane", decode, share=Share(lambda s, q: True, apply), subject=urgent, name=name, lane=True
    )
    async with consuming(nats_client, stage.topology, stage.settings.consumer, [lane], stage.metrics):
        for payload in (b"1", b"not a number", b"2"):
            await stage.js.publish(f"{stage.topology.prefix}.jobs.team-a.j.urgent", payload)
        await wait_until_consumed(stage.js, stage.topology.stream("jobs"), name, timeout_s=20)

    assert sorted(tried) == [1, 2]
    dead = stage.metrics.registry.get_sample_value(
        "mpijc_dead_letters_total", {"consumer": "lane", "reason": "poison"}
    )
    assert dead is None
