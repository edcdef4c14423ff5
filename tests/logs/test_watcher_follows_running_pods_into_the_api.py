"""End to end: the watcher (as its process runs it) follows the containers of a running MPIJob's
launcher and workers into ``LOGS`` as their pods start, reads a container to its end when its pod
ends, and the API serves the run's lines merged, after the pods are deleted. Real client →
simulated API server → real NATS → history in real PostgreSQL → API."""

from __future__ import annotations

import httpx
from nats.aio.client import Client as NATS

from controller.api.access import StaticAccess
from controller.api.app import create_app
from controller.api.logs import RunLogs
from controller.contract.events import JobRef
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.api_fixtures import ADMIN, USERS
from tests.conftest import Stage
from tests.log_fixtures import RUNNING, stored_texts
from tests.pipeline_fixtures import controller_running, wait_for_sql


async def test_running_pods_are_followed_and_read_back_merged_after_they_are_gone(
    sim: SimCluster,
    stage: Stage,
    nats_client: NATS,
) -> None:
    job = k.with_conditions(k.mpijob("llm", workers=1), ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z"))
    uid = job["metadata"]["uid"]
    ref = JobRef(uid=uid, kind="MPIJob", namespace="team-a", name="llm")
    launcher, worker = k.pod(job, "launcher"), k.pod(job, "worker", 0)
    t0 = 1_795_000_000 * 10**9
    async with controller_running(stage.settings, sim, stage.js, stage.topology, stage.engine, stage.metrics):
        sim.create(job)
        for pod in (launcher, worker):
            sim.create(pod)
        sim.set_log("team-a", "llm-worker-0", "worker", "Server listening on 0.0.0.0 port 22\n", at_ns=t0)
        sim.set_log("team-a", "llm-launcher-x7k2p", "launcher", "[1,0]<stdout>:step 1\n", at_ns=t0 + 10)
        for pod in (launcher, worker):
            sim.update(k.with_container_state(pod, RUNNING, phase="Running", ready=True))
        await until(lambda: _count(nats_client, stage.topology, ref, 2), 15.0)
        sim.append_log("team-a", "llm-launcher-x7k2p", "launcher", "[1,0]<stdout>:step 2\n", at_ns=t0 + 20)
        done = {"terminated": {"exitCode": 0, "reason": "Completed"}}
        sim.update(k.with_container_state(launcher, done, phase="Succeeded"))  # read to its end
        await until(lambda: _count(nats_client, stage.topology, ref, 3), 15.0)
        await wait_for_sql(stage.engine, f"SELECT count(*) FROM runs WHERE uid = '{uid}'", 1)
    for pod in (launcher, worker):
        sim.delete(pod)
    app = create_app(
        stage.engine, PipelineMetrics(), StaticAccess(USERS), run_logs=RunLogs(stage.js, stage.topology)
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        answer = await api.get(f"/api/v1/runs/{uid}/logs", headers=ADMIN)
    assert answer.status_code == 200, answer.text
    assert [(x["pod"], x["role"], x["rank"], x["text"]) for x in answer.json()["items"]] == [
        ("llm-worker-0", "worker", None, "Server listening on 0.0.0.0 port 22"),
        ("llm-launcher-x7k2p", "launcher", 0, "[1,0]<stdout>:step 1"),
        ("llm-launcher-x7k2p", "launcher", 0, "[1,0]<stdout>:step 2"),
    ]


async def _count(nc: NATS, topology: Topology, ref: JobRef, wanted: int) -> bool:
    return len(await stored_texts(nc, topology, ref)) >= wanted
