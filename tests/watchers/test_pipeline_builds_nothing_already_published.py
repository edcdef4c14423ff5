"""What a restart's list hands on unchanged is placed but never built: the correlator learns the
job or the pod (its pods and events still find their run), yet no event is made for it (a job's
manifest is not written); a change, a deletion or a pod carrying a log tail is always built."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.contract.events import BusEvent, Change
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from watchers import normalizing
from watchers.correlating import ObjectKind, Observation
from watchers.pipeline import Pipeline

NOW = datetime(2026, 11, 26, 4, 0, tzinfo=UTC)


async def test_unchanged_objects_are_placed_but_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    written: list[str] = []

    def manifest(obj: k.Obj) -> str:
        written.append(obj["metadata"]["name"])
        return "kind: MPIJob\n"

    monkeypatch.setattr(normalizing, "manifest", manifest)
    job, other = k.mpijob("pi", workers=3), k.mpijob("pj", workers=1)
    kept, changed, tailed = (k.pod(job, "worker", i) for i in range(3))
    published = {(o["metadata"]["uid"], o["metadata"]["resourceVersion"]) for o in (kept, tailed, job)}
    asked: list[tuple[str, str]] = []

    def unchanged(kind: str, uid: str, resource_version: str) -> bool:
        asked.append((kind, uid))
        return (uid, resource_version) in published

    out: list[BusEvent] = []

    async def publish(events: list[BusEvent]) -> int:
        out.extend(events)
        return len(events)

    metrics = PipelineMetrics()
    pipeline = Pipeline(publish, metrics, pending_ttl_s=30, unchanged=unchanged)

    def seen(
        kind: ObjectKind, obj: k.Obj, change: Change = "ADDED", tail: tuple[str, ...] = ()
    ) -> Observation:
        return Observation(kind, change, obj, NOW, tail)

    scheduled = k.event(kept, "FailedScheduling", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    await pipeline.feed(
        [
            seen("job", job),
            seen("job", other),
            seen("pod", kept),
            seen("pod", changed),
            seen("pod", tailed, tail=("RuntimeError: NCCL error",)),
            seen("event", scheduled),
            seen("pod", kept, "DELETED"),
        ]
    )

    names = [(e.type, getattr(e, "name", None) or getattr(e, "reason", None), e.change) for e in out]
    assert names == [
        ("job", "pj", "ADDED"),  # "pi" was published at this version: its run is only learnt
        ("pod", changed["metadata"]["name"], "ADDED"),
        ("pod", tailed["metadata"]["name"], "ADDED"),  # a tail is news even at a published version
        ("event", "FailedScheduling", "ADDED"),  # about the unchanged pod: its run is known
        ("pod", kept["metadata"]["name"], "DELETED"),
    ]
    assert {e.job.uid for e in out if e.type == "pod"} == {job["metadata"]["uid"]}  # pods found their run
    assert (
        pipeline.correlator.jobs_by_uid[job["metadata"]["uid"]]
        == normalizing.normalize_job(job, "ADDED", NOW).ref
    )
    assert ("team-a", kept["metadata"]["name"]) in pipeline.correlator.pods
    assert written == ["pj", "pi"]  # the second, "pi", by the line above only
    assert metrics.sample("mpijc_skipped_objects_total", reason="unchanged") == 2
    assert ("job", job["metadata"]["uid"]) in asked
