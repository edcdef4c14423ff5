"""The LOGS stream is declared with the others: S2-compressed, bounded by age and bytes, as many
replicas as the rest, one subject per container of a run; an older declaration is brought to it."""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from nats.js.api import StorageType, StoreCompression, StreamConfig

from controller.bus.logstore import parsed_batches, publish_batches, read_raw, stored_position
from controller.bus.streams import ensure_streams
from controller.contract.logs import LogBatch, LogLine, LogPosition
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import Topology


async def test_logs_stream_is_s2_compressed_and_bounded_by_age_and_bytes(
    js: JetStreamContext, topology: Topology, settings: Settings
) -> None:
    config = (await js.stream_info(topology.stream("logs"))).config
    assert config.compression == StoreCompression.S2
    assert config.max_age == settings.nats.logs_max_age_s
    assert config.max_bytes == settings.nats.logs_max_bytes
    assert config.num_replicas == settings.nats.replicas
    assert config.subjects == [f"{topology.prefix}.logs.>"]


async def test_an_uncompressed_unbounded_logs_stream_is_brought_to_the_settings(
    nats_client: NATS, topology: Topology, settings: Settings
) -> None:
    js = nats_client.jetstream()
    name = topology.stream("logs")
    await js.add_stream(
        StreamConfig(name=name, subjects=[topology.wildcard("logs")], storage=StorageType.FILE)
    )
    wanted = NatsSettings(url=settings.nats.url, prefix=topology.prefix, logs_max_bytes=64 * 1024**2)
    await ensure_streams(js, topology, wanted)
    config = (await js.stream_info(name)).config
    assert (config.compression, config.max_bytes) == (StoreCompression.S2, 64 * 1024**2)


async def test_a_containers_last_batch_says_where_its_log_stands(
    js: JetStreamContext, topology: Topology, settings: Settings
) -> None:
    def batch(pod: str, ts: int, text: str) -> LogBatch:
        line = LogLine(ts=ts, text=text)
        position = LogPosition(ts=ts, ties=1, stored_bytes=len(text))
        return LogBatch(
            run_uid="uid-1",
            namespace="team-a",
            job="llm.v2",
            pod=pod,
            container="main",
            lines=(line,),
            position=position,
        )

    stored = [
        batch("llm.v2-launcher", 10, "a"),
        batch("llm.v2-worker-0", 20, "b"),
        batch("llm.v2-launcher", 30, "c"),
    ]
    assert await publish_batches(js, topology, stored, settings.nats.publish_retry_s) == 3
    assert await publish_batches(js, topology, stored[-1:], settings.nats.publish_retry_s) == 0  # its id
    where = await stored_position(js, topology, "team-a", "llm.v2", "uid-1", "llm.v2-launcher", "main")
    assert where == LogPosition(ts=30, ties=1, stored_bytes=1)
    nowhere = await stored_position(js, topology, "team-a", "llm.v2", "uid-2", "llm.v2-launcher", "main")
    assert nowhere == LogPosition()
    read = [
        s
        async for s in parsed_batches(read_raw(js, topology, topology.run_logs("team-a", "llm.v2", "uid-1")))
        if s is not None
    ]
    assert [s.batch.lines[0].text for s in read] == ["a", "b", "c"]
    assert [s.seq for s in read] == [1, 2, 3]
    of_pod = [
        b.batch
        async for b in parsed_batches(
            read_raw(js, topology, topology.run_logs("team-a", "llm.v2", "uid-1", "llm.v2-worker-0"))
        )
        if b is not None
    ]
    assert [b.lines[0].text for b in of_pod] == ["b"]
