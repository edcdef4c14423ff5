"""The core subscription door (:func:`controller.bus.listening.listening`): bus events published on
its subject reach the role parsed, what is not a bus event is dropped without ending the
subscription, and nothing is heard once the block is left."""

from __future__ import annotations

from controller.bus.client import NATS
from controller.bus.listening import listening
from controller.contract.events import BusEvent, LogProbed
from controller.contract.subjects import Topology
from controller.testing.events import log_probe
from controller.testing.waits import until


async def test_events_are_heard_parsed_and_junk_is_dropped(nats_client: NATS, topology: Topology) -> None:
    heard: list[BusEvent] = []

    async def hear(event: BusEvent) -> None:
        heard.append(event)

    first, second = log_probe(3), log_probe(5)
    subject = topology.log_probes().replace("*", "a")
    async with listening(nats_client, topology.log_probes(), hear):
        await nats_client.publish(subject, first.model_dump_json().encode())
        await nats_client.publish(subject, b"{not json")
        await nats_client.publish(subject, b'{"schema_version": 1, "type": "nonsense"}')
        await nats_client.publish(subject, second.model_dump_json().encode())
        await until(lambda: len(heard) >= 2, 10)
    assert [type(e) for e in heard] == [LogProbed, LogProbed]
    assert heard == [first, second]

    # Left: the server has the unsubscribe before the next publish (one connection, in order), so a
    # listener opened now hears the next event and the one left hears nothing more.
    later: list[BusEvent] = []

    async def hear_later(event: BusEvent) -> None:
        later.append(event)

    async with listening(nats_client, topology.log_probes(), hear_later):
        await nats_client.publish(subject, first.model_dump_json().encode())
        await until(lambda: len(later) == 1, 10)
    assert heard == [first, second]
