"""Objects without metadata.uid and events of unknown types are counted, logged and skipped — never fatal.

The canned events below are served as-is by the simulated API server, in a real watch
stream, so they go through the real client path.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from controller.contract.settings import WatcherSettings
from controller.kube.gateway import KubeGateway
from controller.kube.resources import MPI_PODS
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.kube_fixtures import watch_requests, watching

POD_WITHOUT_METADATA: dict[str, Any] = {
    "type": "ADDED",
    "object": {"apiVersion": "v1", "kind": "Pod", "spec": {}},
}


def _pod_event(kind: str, metadata: dict[str, str], **fields: Any) -> dict[str, Any]:
    """A watch event of type ``kind`` carrying a Pod of ``metadata`` (and ``fields``)."""
    return {"type": kind, "object": {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, **fields}}


POD_WITHOUT_UID = _pod_event(
    "MODIFIED",
    {"name": "ghost", "namespace": "team-a", "resourceVersion": "7"},
    spec={},
    status={"phase": "Running"},
)
OBJECT_NOT_A_MAPPING: dict[str, Any] = {"type": "DELETED", "object": ["not", "an", "object"]}
UNKNOWN_EVENT_TYPE = _pod_event("SURPRISE", {"name": "p", "uid": "u-1", "resourceVersion": "8"})
EVENT_WITHOUT_TYPE: dict[str, Any] = {"object": {"metadata": {"uid": "u-2"}}}
STREAM_WITH_GARBAGE = [
    POD_WITHOUT_METADATA,
    POD_WITHOUT_UID,
    OBJECT_NOT_A_MAPPING,
    UNKNOWN_EVENT_TYPE,
    EVENT_WITHOUT_TYPE,
]


async def test_garbage_in_the_stream_is_skipped_and_the_loop_goes_on(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings, caplog: pytest.LogCaptureFixture
) -> None:
    job = sim.create(k.mpijob("pi", workers=1))
    async with watching(gateway, MPI_PODS, watcher_settings) as watch:
        await until(lambda: len(watch_requests(sim, "pods")) == 1)
        with caplog.at_level(logging.WARNING, logger="watchers.watching"):
            for event in STREAM_WITH_GARBAGE:
                sim.inject(MPI_PODS, event)
            sim.create(k.pod(job, "launcher"))
            await watch.recorder.wait_for_count(1)

    assert watch.recorder.seen() == [("ADDED", "pi-launcher-x7k2p")]
    assert watch.sample("mpijc_watch_skipped_total", reason="malformed") == 3
    assert watch.sample("mpijc_watch_skipped_total", reason="unknown-type") == 2
    assert watch.task.exception() is None, "the loop ended only because it was stopped"
    assert len(watch_requests(sim, "pods")) == 1, "garbage does not cost a reconnect"
    skipped = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert len(skipped) == 5
    assert any("'SURPRISE'" in message for message in skipped)


async def test_a_listed_object_without_uid_is_skipped(
    sim: SimCluster, gateway: KubeGateway, watcher_settings: WatcherSettings
) -> None:
    job = sim.create(k.mpijob("pi", workers=1))
    broken = k.pod(job, "worker", 0)
    broken["metadata"]["uid"] = ""
    sim.create(broken)
    sim.create(k.pod(job, "launcher"))
    async with watching(gateway, MPI_PODS, watcher_settings) as watch:
        await watch.recorder.wait_for_count(1)
        await until(lambda: len(watch_requests(sim, "pods")) == 1)

    assert watch.recorder.seen() == [("ADDED", "pi-launcher-x7k2p")]
    assert watch.sample("mpijc_watch_skipped_total", reason="malformed") == 1
