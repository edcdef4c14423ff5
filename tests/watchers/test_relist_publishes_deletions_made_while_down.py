"""A job deleted while no watcher ran is deleted downstream once one runs again, once: a watch
resumed from where the last watcher stood brings the deletion itself; when that position was
compacted away, the first list after a start is compared with what was published before it
(the ``published`` bucket keeps each object's identity), and what is gone gets its deletion
published. Real NATS, the simulated API server, the history consumer on real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from nats.aio.client import Client as NATS
from nats.js import JetStreamContext
from sqlalchemy import text

from consumers.rules import RuleEngine
from controller.bus.publishing import Publisher
from controller.bus.streams import ensure_streams
from controller.bus.versions import BUCKET, POSITIONS
from controller.contract.events import BusEvent, parse_event
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.kube.resources import WATCHED
from controller.testing import events as eb
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from tests.buckets import bucket_keys, object_keys
from tests.conftest import Stage
from tests.pipeline_fixtures import consumers_running, scalar
from tests.watchers.test_relist_publishes_only_what_changed import watch_until_quiet
from watchers.published import PublishedVersions


async def published(js: JetStreamContext, topology: Topology) -> list[BusEvent]:
    """Every message of the JOBS stream, in order."""
    stream = topology.stream("jobs")
    last = (await js.stream_info(stream)).state.last_seq
    return [parse_event((await js.get_msg(stream, seq)).data) for seq in range(1, last + 1)]


def hangs(events: list[BusEvent], job_uid: str, hours_later: float) -> list[str]:
    """The hang findings the rules hold for ``job_uid`` after ``events``, ``hours_later``."""
    engine = RuleEngine()
    for event in events:
        engine.observe(event, event.observed_at)
    engine.tick(max(e.observed_at for e in events) + timedelta(hours=hours_later))
    return [f.rule for f in engine.firing(job_uid) if f.rule.startswith("hang")]


@pytest.mark.parametrize("compacted", [False, True], ids=["watch-resumed", "position-compacted"])
async def test_a_job_deleted_while_the_watcher_was_down_is_deleted_once_it_is_back(
    compacted: bool,
    sim: SimCluster,
    stage: Stage,
) -> None:
    await ensure_streams(stage.js, stage.topology, stage.settings.nats)
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    kept, gone = k.mpijob("kept", workers=1, created=now), k.mpijob("gone", workers=2, created=now)
    kept_pods = [k.pod(kept, "worker", 0, created=now)]
    gone_pods = [k.pod(gone, "worker", i, created=now) for i in range(2)]
    objects = [kept, gone, *kept_pods, *gone_pods]
    for obj in objects:
        sim.create(obj)
    uid = gone["metadata"]["uid"]
    run = f"SELECT {{}} FROM runs WHERE uid = '{uid}'"

    async with consumers_running(stage.settings, stage.topology, stage.engine, stage.metrics):
        await watch_until_quiet(stage.settings, sim, stage.js, stage.topology, expected=len(objects))
        before = await published(stage.js, stage.topology)
        assert hangs(before, uid, hours_later=2), "a job left pending is a hang: the check below can fail"

        deleted = [sim.delete(obj) for obj in [gone, *gone_pods]]  # while no watcher runs
        if compacted:  # the watchers' positions are too old now: they list first
            sim.compact()

        async def history_has_it_deleted() -> bool:
            return await scalar(stage.engine, run.format("deleted_at IS NOT NULL")) is True

        await watch_until_quiet(
            stage.settings,
            sim,
            stage.js,
            stage.topology,
            expected=len(objects) + 3,
            also=history_has_it_deleted,
        )
        after = await published(stage.js, stage.topology)
        deleted_pods = await scalar(
            stage.engine, f"SELECT count(*) FROM pods WHERE run_uid = '{uid}' AND deleted_at IS NOT NULL"
        )
        kept_deleted = await scalar(
            stage.engine, f"SELECT deleted_at FROM runs WHERE uid = '{kept['metadata']['uid']}'"
        )
        workers = await scalar(stage.engine, run.format("spec->>'workers'"))
        async with stage.engine.connect() as conn:
            timeline = (
                await conn.execute(text(f"SELECT summary FROM timeline WHERE run_uid = '{uid}' ORDER BY id"))
            ).scalars()
            summaries = list(timeline)

        restarted = await watch_until_quiet(
            stage.settings, sim, stage.js, stage.topology, expected=len(after)
        )
        again = await published(stage.js, stage.topology)

    deletions = after[len(before) :]
    assert sorted((e.type, e.uid, e.change) for e in deletions) == sorted(
        ("job" if o is gone else "pod", o["metadata"]["uid"], "DELETED") for o in [gone, *gone_pods]
    ), "the job and its pods, deleted once each"
    job = next(e for e in deletions if e.type == "job")
    assert (job.name, job.namespace, job.kind, job.phase, job.labels) == (
        "gone",
        "team-a",
        "MPIJob",
        "Pending",
        {"team": "a"},
    )
    (last,) = [e for e in before if e.uid == uid]
    if compacted:
        assert job.resource_version == last.resource_version, "the version last published"
    else:
        assert job.resource_version == deleted[0]["metadata"]["resourceVersion"], "the deletion's own"
    assert (deleted_pods, kept_deleted) == (2, None)
    assert workers == "2", "the deletion notice keeps what history knew of the run"
    assert "MPIJob gone deleted" in summaries
    assert hangs(after, uid, hours_later=2) == [], "a deleted job hangs no more"

    assert again == after, "a restart with nothing deleted publishes nothing"
    assert restarted.sample("mpijc_skipped_objects_total", reason="unchanged") == len(objects) - 3
    survivors = {f"job.{kept['metadata']['uid']}", f"pod.{kept_pods[0]['metadata']['uid']}"}
    assert await object_keys(stage.js, stage.topology.bucket(BUCKET), POSITIONS) == survivors
    keys = await bucket_keys(stage.js, stage.topology.bucket(BUCKET))
    assert len(keys - survivors) == len(WATCHED), "and where each watch stood"


async def test_versions_written_without_identity_still_count_and_gain_it(
    sim: SimCluster, settings: Settings, topology: Topology, js: JetStreamContext, nats_client: NATS
) -> None:
    """A value an earlier version wrote (``<rv>:<change>``) is a version like any: the object is
    not republished and its value gains the identity. A job deleted during the upgrade gets its
    identity from its last observation on the bus and is deleted; a pod cannot be told and is
    left alone; an identity that does not parse makes up no deletion and stops nothing."""
    await ensure_streams(js, topology, settings.nats)
    job = sim.create(k.mpijob("old", workers=1))
    pod = sim.create(k.pod(job, "worker", 0))
    upgraded_away = eb.job("Running", job=eb.ref(name="upgraded-away", uid="uid-upgraded-away"))
    await Publisher(js, topology).publish([upgraded_away])  # by the version before
    await PublishedVersions(nats_client, topology).load(settings.nats)  # the bucket, empty
    kv = await js.key_value(topology.bucket(BUCKET))  # values as the version before wrote them
    for key, version in (
        (f"job.{job['metadata']['uid']}", f"{job['metadata']['resourceVersion']}:ADDED"),
        (f"pod.{pod['metadata']['uid']}", f"{pod['metadata']['resourceVersion']}:ADDED"),
        ("job.uid-upgraded-away", f"{upgraded_away.resource_version}:MODIFIED"),
        ("pod.deleted-during-the-upgrade", "7:MODIFIED"),
        ("job.garbled", "8:MODIFIED\nMPIJob/team-a\n{not json"),
    ):
        await kv.put(key, version.encode())

    async def forgotten() -> bool:  # a deleted object's key is purged in the background
        return "job.uid-upgraded-away" not in await bucket_keys(js, topology.bucket(BUCKET))

    metrics = await watch_until_quiet(settings, sim, js, topology, expected=2, also=forgotten)

    (deleted,) = (await published(js, topology))[1:]
    assert (deleted.type, deleted.uid, deleted.change) == ("job", "uid-upgraded-away", "DELETED")
    assert (deleted.name, deleted.resource_version) == ("upgraded-away", upgraded_away.resource_version)
    assert metrics.sample("mpijc_skipped_objects_total", reason="unchanged") == 2, "nothing republished"
    for obj, kind in ((job, "job"), (pod, "pod")):
        value = (await kv.get(f"{kind}.{obj['metadata']['uid']}")).value or b""
        version = f"{obj['metadata']['resourceVersion']}:ADDED"
        assert value.decode().startswith(f"{version}\nMPIJob/team-a\n{{"), value
    assert "pod.deleted-during-the-upgrade" in await bucket_keys(js, topology.bucket(BUCKET))
