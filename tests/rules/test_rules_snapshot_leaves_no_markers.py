"""A snapshot does not grow with history: a forgotten run's key is purged from the bucket, not
deleted — a delete marker would stay for ever (the bucket has no TTL) and every later start
would read it — and the markers an earlier version left are removed by the next load."""

from __future__ import annotations

from nats.js import JetStreamContext

from consumers.rules import RuleEngine
from consumers.rules.snapshot import STATE_BUCKET, SnapshotStore, state_bucket
from controller.contract.subjects import Topology
from controller.testing.events import JOB_UID, replay, running_run
from tests.buckets import bucket_keys


async def test_a_forgotten_run_leaves_nothing_in_the_bucket(js: JetStreamContext, topology: Topology) -> None:
    kv = await state_bucket(js, topology)
    engine = RuleEngine()
    replay(engine, running_run())
    store = SnapshotStore(kv, 0)
    try:
        await store.save(engine, 10, None)
        assert f"p0.run.{JOB_UID}" in await bucket_keys(js, topology.bucket(STATE_BUCKET))

        engine._forget(JOB_UID, tombstone=True)
        await store.save(engine, 11, None)

        assert await bucket_keys(js, topology.bucket(STATE_BUCKET)) == {"p0.meta", "p0.tombstones"}
        again = RuleEngine()
        assert (await SnapshotStore(kv, 0).load(again)).runs == 0
    finally:
        await js.delete_key_value(topology.bucket(STATE_BUCKET))


async def test_markers_left_by_deletes_are_removed_on_load(js: JetStreamContext, topology: Topology) -> None:
    kv = await state_bucket(js, topology)
    engine = RuleEngine()
    replay(engine, running_run())
    try:
        await SnapshotStore(kv, 0).save(engine, 10, None)
        for n in range(50):  # as earlier versions removed forgotten runs
            await kv.put(f"p0.run.old-{n}", b"{}")
            await kv.delete(f"p0.run.old-{n}")
        assert len(await bucket_keys(js, topology.bucket(STATE_BUCKET))) == 52

        loaded = await SnapshotStore(kv, 0).load(RuleEngine())

        assert loaded.runs == 1 and loaded.sequence == 10
        assert await bucket_keys(js, topology.bucket(STATE_BUCKET)) == {"p0.meta", f"p0.run.{JOB_UID}"}
    finally:
        await js.delete_key_value(topology.bucket(STATE_BUCKET))
