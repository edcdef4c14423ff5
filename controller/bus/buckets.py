"""JetStream key-value buckets: opened (or created) in one place, and keys removed without a trace.

A bucket is a stream ``KV_<bucket>`` whose subjects are ``$KV.<bucket>.<key>`` (the KV layout
every NATS client shares). ``KeyValue.delete`` and ``purge`` leave a marker message per key,
kept until the bucket's ``ttl`` (for ever in a bucket without one), and every reader that walks
the bucket at start-up reads each of them: on a cluster with churn — a week of finished runs,
thousands of deleted pods — a start would grow with history. :func:`forget` purges the key's
subject from the stream instead (JetStream's stream purge with a subject filter, on every
server version), which leaves nothing behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from controller.bus.answering import until_answered

__all__ = ["forget", "open_bucket"]

_PURGES_IN_FLIGHT = 64


async def open_bucket(js: JetStreamContext, config: KeyValueConfig) -> KeyValue:
    """The bucket ``config.bucket``, created with ``config`` if it does not exist yet.

    Asked again while the cluster cannot answer (:func:`controller.bus.answering.until_answered`);
    a bucket it creates is returned once the cluster knows it and its stream has a leader: a
    replicated stream created a moment ago is not yet known to every server, which would answer
    the next read ``404``, and until its leader is elected a put meets no responders."""

    async def bind_or_create() -> tuple[KeyValue, bool]:
        try:
            return await js.key_value(config.bucket), False
        except (BucketNotFoundError, NotFoundError):
            return await js.create_key_value(config), True

    what = f"bucket {config.bucket}"
    kv, created = await until_answered(bind_or_create, what)
    if created:
        await until_answered(lambda: _led(js, f"KV_{config.bucket}"), what, missing=True)
    return kv


async def _led(js: JetStreamContext, stream: str) -> None:
    """Return once ``stream`` has a leader (a server outside a cluster reports no cluster and leads
    its streams itself)."""
    cluster = (await js.stream_info(stream)).cluster
    if cluster is not None and not cluster.leader:
        raise TimeoutError(f"stream {stream} has no leader yet")


async def forget(kv: KeyValue, keys: Iterable[str]) -> None:
    """Remove ``keys`` from the bucket with every revision, leaving no delete marker.

    Raises what JetStream answered to the first purge that failed (the others are still tried)."""
    # nats-py keeps a bucket's context and name there and offers no accessor
    js, bucket = kv._js, kv._name
    stream, slots = f"KV_{bucket}", asyncio.Semaphore(_PURGES_IN_FLIGHT)

    async def purge(key: str) -> None:
        async with slots:
            await js.purge_stream(stream, subject=f"$KV.{bucket}.{key}")

    results = await asyncio.gather(*(purge(key) for key in keys), return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
