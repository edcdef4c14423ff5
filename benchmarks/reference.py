"""The least an ingest pipeline can do on this box: the reference the ingest benchmark is compared with.

Measured in the same run, on the same embedded PostgreSQL and NATS, with the same payloads,
so the noise of a shared machine cancels out of the ratio:

- this process publishes every payload to a JetStream stream of its own (file storage, one
  ``Nats-Msg-Id`` each, as the project's messages carry), pipelined as hard as nats-py allows:
  ``publish_async`` for all of them with room for every ack pending, then one wait for the acks;
- one consumer process (``python -m benchmarks.reference consume``), as the history consumer
  runs in its own: a durable pull consumer with ``AckPolicy.ALL``, ``fetch`` of 500, one
  ``INSERT … ON CONFLICT (uid) DO UPDATE`` ``executemany`` into a table of its own with raw
  asyncpg in one transaction, commit, then one ack of the batch's last message;
- the time from the first publish until the durable has nothing pending or unacknowledged, and
  the CPU seconds spent meanwhile by this process, the consumer process, and the groups the
  caller names (nats-server, PostgreSQL: :class:`benchmarks.harness.CpuMeter`).

No parsing, no normalizing, no history of states: what is left is the bus, the database and
the process boundary, the cost any design pays.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg  # type: ignore[import-untyped]  # the driver SQLAlchemy uses; no stubs
import nats
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from benchmarks.harness import Bench, CpuMeter
from controller.bus.streams import wait_until_consumed
from controller.cli.embedded import die_with_this_process

STREAM = "REFERENCE"
SUBJECT = "reference.pods"
DURABLE = "reference"
TABLE = "reference_pods"
BATCH = 500
UPSERT = (
    f"INSERT INTO {TABLE} (uid, resource_version, body) VALUES ($1, $2, $3::jsonb) ON CONFLICT (uid) "
    "DO UPDATE SET resource_version = EXCLUDED.resource_version, body = EXCLUDED.body"
)


@dataclass(frozen=True)
class Payload:
    """One message: the id JetStream deduplicates it by, and the object's JSON."""

    msg_id: str
    body: bytes


def payloads(objects: Iterable[Mapping[str, Any]]) -> list[Payload]:
    """The workload's objects as the reference sends them."""
    return [
        Payload(
            f"{obj['metadata']['uid']}:{obj['metadata']['resourceVersion']}",
            json.dumps(obj, separators=(",", ":")).encode(),
        )
        for obj in objects
    ]


async def consume(nats_url: str, database_url: str) -> None:
    """The consumer process: fetch, upsert the batch, commit, ack it, until terminated."""
    nc = await nats.connect(nats_url)
    js = nc.jetstream()
    db = await asyncpg.connect(database_url)
    sub = await js.pull_subscribe(SUBJECT, durable=DURABLE, stream=STREAM)
    print("ready", flush=True)
    while True:
        try:
            msgs = await sub.fetch(BATCH, timeout=1.0)
        except (NatsTimeoutError, TimeoutError):
            continue
        rows = []
        for msg in msgs:
            meta = json.loads(msg.data)["metadata"]
            rows.append((meta["uid"], int(meta["resourceVersion"]), msg.data.decode()))
        async with db.transaction():
            await db.executemany(
                UPSERT,
                rows,
            )
        await msgs[-1].ack()  # AckPolicy.ALL: the whole batch


async def reference_throughput(
    env: Bench, sent: list[Payload], groups: Mapping[str, Sequence[int]]
) -> dict[str, Any]:
    """Publish ``sent`` through the reference pipeline; events/s until all of it is committed, and
    the CPU seconds (``cpu_s``) of this process, the consumer process (``consumers``), ``groups``
    and PostgreSQL meanwhile."""
    await env.js.add_stream(StreamConfig(name=STREAM, subjects=[SUBJECT], storage=StorageType.FILE))
    await env.js.add_consumer(
        STREAM, ConsumerConfig(durable_name=DURABLE, ack_policy=AckPolicy.ALL, max_ack_pending=20_000)
    )
    db = await asyncpg.connect(env.database_url)
    try:
        await db.execute(
            f"CREATE TABLE IF NOT EXISTS {TABLE} (uid text PRIMARY KEY, resource_version bigint, body jsonb)"
        )
    finally:
        await db.close()
    consumer = subprocess.Popen(  # noqa: ASYNC220 - started once, before the clock runs
        [sys.executable, "-m", "benchmarks.reference", "consume", env.nats_url, env.database_url],
        stdout=subprocess.PIPE,
        env=os.environ,
        preexec_fn=die_with_this_process(signal.SIGTERM),  # noqa: PLW1509 - only prctl
    )
    try:
        assert consumer.stdout is not None
        await asyncio.to_thread(consumer.stdout.readline)  # "ready"
        js = env.nc.jetstream(publish_async_max_pending=len(sent) + 1)
        meter = CpuMeter({**groups, "consumers": [consumer.pid]}, env.data_dir / "postgres")
        cpu = meter.read()
        start = time.perf_counter()
        for payload in sent:
            await js.publish_async(SUBJECT, payload.body, headers={"Nats-Msg-Id": payload.msg_id})
        await js.publish_async_completed()
        published = time.perf_counter()
        await wait_until_consumed(env.js, STREAM, DURABLE, 300)
        done = time.perf_counter()
        spent = meter.since(cpu)
    finally:
        consumer.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            consumer.wait(10)
    return side_report(len(sent), start, published, done, spent)


def side_report(
    events: int, start: float, published: float, done: float, cpu_s: Mapping[str, float]
) -> dict[str, Any]:
    """What either side of the comparison reports: ``events`` published from ``start`` until
    ``published`` and all committed by ``done`` (:func:`time.perf_counter` seconds), and the CPU
    seconds by component meanwhile."""
    return {
        "events": events,
        "seconds": round(done - start, 3),
        "events_per_s": round(events / (done - start)),
        "publish_events_per_s": round(events / (published - start)),
        "cpu_s": cpu_s,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the reference pipeline's consumer process")
    parser.add_argument("role", choices=["consume"])
    parser.add_argument("nats_url")
    parser.add_argument("database_url")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(consume(args.nats_url, args.database_url))
