"""``mpijob-controller up`` as a person starts it: watchers, consumers and API in one process,
against a (simulated) cluster from a kubeconfig; a job created there shows up in the API with
its finding, and the process stops cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest

from controller.contract.settings import Settings
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from tests.history.test_end_to_end_watch_to_history import kubeconfig

pytestmark = pytest.mark.slow


async def eventually(
    client: httpx.AsyncClient, path: str, check: object, timeout_s: float = 30
) -> httpx.Response:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        try:
            response = await client.get(path)
            if response.status_code == 200 and check(response.json()):  # type: ignore[operator]
                return response
        except httpx.TransportError:
            pass
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"GET {path} never satisfied the check")
        await asyncio.sleep(0.1)


async def test_up_watches_stores_and_serves(sim: SimCluster, settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    env = cli_env(
        settings,
        tmp_path,
        MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp_path / "kubeconfig")),
        MPIJC_API__PORT=str(port),
        MPIJC_API__AUTH="off",  # a local single-user start; auth itself is tested elsewhere
    )
    log = tmp_path / "up.log"
    process = start_cli(["up"], env, tmp_path, log)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await eventually(client, "/healthz", lambda body: body == {"status": "ok"})
            job = k.mpijob("served", workers=1)
            worker = k.pod(job, "worker", 0, node="gpu-0")
            sim.create(job)
            sim.create(worker)
            sim.update(
                k.with_container_state(
                    worker, {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, phase="Failed"
                )
            )

            runs = await eventually(
                client,
                "/api/v1/runs?namespace=team-a",
                lambda body: [r["name"] for r in body["items"]] == ["served"],
            )
            uid = runs.json()["items"][0]["uid"]
            detail = await eventually(
                client, f"/api/v1/runs/{uid}", lambda body: any(f["rule"] == "oom" for f in body["findings"])
            )
            metrics = (await client.get("/metrics")).text
            missing = await client.get("/api/v1/runs/no-such-uid")
            bad_limit = await client.get("/api/v1/runs?limit=0")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)

    assert process.returncode == 0, log.read_text()[-3000:]
    findings = {f["rule"]: f for f in detail.json()["findings"]}
    assert findings["oom"]["root_cause"] == "Worker 0 failed: out of memory (limit 16Gi)"
    assert 'mpijc_watch_events_total{resource="pods[training.kubeflow.org/job-name]"' in metrics
    assert missing.status_code == 404 and "no run with uid" in missing.json()["detail"]
    assert bad_limit.status_code == 422
