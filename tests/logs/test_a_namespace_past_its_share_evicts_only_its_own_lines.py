"""One namespace's chatty runs cannot push another namespace's lines out of ``LOGS``: past its
share (``MPIJC_LOGS__NAMESPACE_MAX_BYTES``) a namespace evicts its own oldest lines, long before
the stream's own limit would evict the oldest of everyone's."""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from controller.bus.logshares import CHUNKS, LogShares, Share
from controller.bus.logstore import parsed_batches, publish_after, read_raw
from controller.bus.streams import ensure_streams
from controller.contract.logs import LogBatch, LogLine, LogPosition
from controller.contract.settings import LogSettings, NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.testing.waits import until
from tests.log_fixtures import Logged, stored_texts

STREAM_BYTES = 1024**2
"""The stream's limit in these tests: the smallest the settings take."""
SHARE = 256 * 1024


def _batch(namespace: str, n: int, text: str) -> LogBatch:
    line = LogLine(ts=n, text=text)
    return LogBatch(
        run_uid=f"uid-{namespace}",
        namespace=namespace,
        job="train",
        pod="train-launcher",
        container="main",
        lines=(line,),
        position=LogPosition(ts=n, ties=1, stored_bytes=n * len(text)),
    )


async def _texts(js: JetStreamContext, topology: Topology, namespace: str) -> list[str]:
    return [
        line.text
        async for stored in parsed_batches(
            read_raw(js, topology, topology.run_logs(namespace, "train", f"uid-{namespace}"))
        )
        if stored is not None
        for line in stored.batch.lines
    ]


async def test_a_chatty_namespace_evicts_its_own_oldest_lines_and_not_another_namespaces(
    nats_client: NATS, topology: Topology, settings: Settings
) -> None:
    js = nats_client.jetstream()
    await ensure_streams(js, topology, NatsSettings(prefix=topology.prefix, logs_max_bytes=STREAM_BYTES))
    shares = LogShares(js, topology, SHARE)
    retry_s = settings.nats.publish_retry_s
    await publish_after(js, topology, [_batch("quiet", 1, "the quiet team's only line")], 0, retry_s, shares)
    await shares.settle()

    seq, chunk = 0, "x" * (32 * 1024)
    for n in range(1, 129):  # 4 MiB: four times the stream, sixteen times the share
        seq = await publish_after(
            js, topology, [_batch("chatty", n, f"{n:04d}{chunk}")], seq, retry_s, shares
        )
        await shares.settle()

    assert await _texts(js, topology, "quiet") == ["the quiet team's only line"]
    kept = [int(text[:4]) for text in await _texts(js, topology, "chatty")]
    assert kept == list(range(kept[0], 129))  # the newest, in order, without a gap
    kept_bytes = sum(len(chunk) + 4 for _ in kept)
    assert SHARE - SHARE // CHUNKS - 64 * 1024 <= kept_bytes <= SHARE
    account = await shares.account("chatty")
    assert account.total <= SHARE and (await shares.account("quiet")).total < 1024


def test_an_account_keeps_stream_order_and_drops_what_the_stream_no_longer_holds() -> None:
    share = Share()
    share.add(10, 60, chunk_bytes=100)
    share.add(8, 60, chunk_bytes=100)  # another replica's note, stored before: the chunk's end stays
    share.add(20, 30, chunk_bytes=100)
    assert share.chunks == [[10, 120], [20, 30]]
    assert list(share.over(100)) == [10] and share.chunks == [[20, 30]]
    share.forget_before(21)  # aged out of the stream, or gone to its own limit
    assert share.total == 0
    assert Share.decode(b"not json").chunks == [] and Share.decode(share.encode()).chunks == []


async def test_the_follower_keeps_each_namespace_within_its_share(logged: Logged) -> None:
    run = logged.run("chatty", workers=0)
    namespace, pod, container = run.pod(0)
    limits = LogSettings(retry_s=0.05, namespace_max_bytes=64 * 1024, batch_max_bytes=8192, linger_s=0)
    line = "y" * 1000
    async with logged.following(limits) as follow:
        follow.add(run)
        logged.sim.append_log(namespace, pod, container, "".join(f"{i:05d}{line}\n" for i in range(400)))
        await until(lambda: _last_is(logged.nc, logged.topology, run, "00399"), 20.0)
        await until(lambda: follow.metrics.sample("mpijc_log_share_evictions_total") >= 1, 20.0)
        account = await follow.follower.shares.account(namespace)
        assert account.total <= 64 * 1024
    texts = await logged.texts(run.job)
    assert texts[-1].startswith("00399") and not texts[0].startswith("00000")


async def _last_is(nc: NATS, topology: Topology, run: object, prefix: str) -> bool:
    texts = await stored_texts(nc, topology, run.job)  # type: ignore[attr-defined]
    return bool(texts) and texts[-1].startswith(prefix)
