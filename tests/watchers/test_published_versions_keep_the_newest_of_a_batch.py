"""Several versions of one object published in one batch are remembered once, as the newest:
the ``published`` bucket keeps one revision, so the older ones are never written; a start after
it drops the newest version and publishes an older one again. Real NATS."""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.js import JetStreamContext

from controller.bus.versions import BUCKET, POSITIONS
from controller.contract.events import BusEvent
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.testing import events as eb
from controller.testing.waits import until
from tests.buckets import object_keys
from watchers.published import PublishedVersions


async def stored(js: JetStreamContext, topology: Topology) -> int:
    """How many writes the bucket's stream has stored (its last sequence)."""
    return (await js.stream_info(f"KV_{topology.bucket(BUCKET)}")).state.last_seq


async def test_a_burst_of_versions_of_one_pod_is_written_once_as_the_newest(
    settings: Settings, topology: Topology, js: JetStreamContext, nats_client: NATS
) -> None:
    versions = PublishedVersions(nats_client, topology)
    await versions.load(settings.nats)
    before = await stored(js, topology)
    burst: list[BusEvent] = [eb.pod(uid="uid-a", resource_version=str(rv)) for rv in range(11, 16)]
    other = eb.pod("worker", 1, uid="uid-b", resource_version="20", change="ADDED")
    await versions.remember([*burst[:2], other, *burst[2:]])
    kv = await js.key_value(topology.bucket(BUCKET))
    await kv.put("pod.uid-last", b"")  # acknowledged once every put before it is stored

    assert await stored(js, topology) == before + 3, "pod a once, pod b, the last"
    assert ((await kv.get("pod.uid-a")).value or b"").startswith(b"15:MODIFIED\n")

    await kv.purge("pod.uid-last")
    after_restart = PublishedVersions(nats_client, topology)
    assert await after_restart.load(settings.nats) == 2
    assert after_restart.unchanged("pod", "uid-a", "15")
    assert after_restart.unchanged("pod", "uid-b", "20")
    assert not after_restart.unchanged("pod", "uid-a", "14"), "an older state is news again"
    assert after_restart.changed(burst) == burst[:-1]


async def test_a_pod_changed_then_deleted_in_one_batch_leaves_the_bucket(
    settings: Settings, topology: Topology, js: JetStreamContext, nats_client: NATS
) -> None:
    versions = PublishedVersions(nats_client, topology)
    await versions.load(settings.nats)
    kept = eb.pod("worker", 1, uid="uid-kept", resource_version="30")
    await versions.remember(
        [
            eb.pod(uid="uid-gone", resource_version="31"),
            kept,
            eb.pod(uid="uid-gone", resource_version="32"),
            eb.pod(uid="uid-gone", resource_version="33", change="DELETED"),
        ]
    )

    async def only_the_kept_pod() -> bool:
        return await object_keys(js, topology.bucket(BUCKET), POSITIONS) == {"pod.uid-kept"}

    await until(only_the_kept_pod)
    after_restart = PublishedVersions(nats_client, topology)
    assert await after_restart.load(settings.nats) == 1
    assert after_restart.changed([eb.pod(uid="uid-gone", resource_version="32")]), "forgotten"
    assert after_restart.changed([kept]) == []
