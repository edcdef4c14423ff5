"""``mpijob-controller up`` as a person starts it: watchers, each consumer role and the API in
their own processes, against a (simulated) cluster from a kubeconfig; a job created there shows
up in the API with its finding; ``up`` stops every child on SIGTERM, and a child that dies is
started again, counted, while the others run on."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path

import httpx
import pytest

from controller.contract.settings import Settings
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.waits import STARTUP_S, until
from tests.history.test_end_to_end_watch_to_history import kubeconfig

pytestmark = pytest.mark.slow


async def eventually(
    client: httpx.AsyncClient, path: str, check: object, timeout_s: float = STARTUP_S
) -> httpx.Response:
    """GET ``path`` until it answers 200 with a body that passes ``check``; the default bound is
    a start-up's (the first answers of a freshly started ``up`` wait for its parts to start)."""
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


async def oom_killed_run(client: httpx.AsyncClient, sim: SimCluster, name: str) -> tuple[str, httpx.Response]:
    """An MPIJob ``name`` whose worker is OOM-killed, followed through the API until its run
    carries the ``oom`` finding: the run's uid and its detail."""
    job = k.mpijob(name, workers=1)
    worker = k.pod(job, "worker", 0, node="gpu-0")
    sim.create(job)
    sim.create(worker)
    sim.update(k.oom_killed(worker))
    runs = await eventually(
        client, "/api/v1/runs?namespace=team-a", lambda body: [r["name"] for r in body["items"]] == [name]
    )
    uid = runs.json()["items"][0]["uid"]
    detail = await eventually(
        client, f"/api/v1/runs/{uid}", lambda body: any(f["rule"] == "oom" for f in body["findings"])
    )
    return uid, detail


async def test_up_watches_stores_and_serves(sim: SimCluster, settings: Settings, tmp_path: Path) -> None:
    port, metrics_port = free_port(), free_port()
    env = cli_env(
        settings,
        tmp_path,
        MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp_path / "kubeconfig")),
        MPIJC_API__PORT=str(port),
        MPIJC_METRICS__PORT=str(metrics_port),
        MPIJC_API__AUTH="off",  # a local single-user start; auth itself is tested elsewhere
    )
    log = tmp_path / "up.log"
    process = start_cli(["up"], env, tmp_path, log)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await eventually(client, "/healthz", lambda body: body == {"status": "ok"})
            _, detail = await oom_killed_run(client, sim, "served")
            async with httpx.AsyncClient(timeout=5) as scraper:
                metrics = (await scraper.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
            hidden = await client.get("/metrics")
            missing = await client.get("/api/v1/runs/no-such-uid")
            bad_limit = await client.get("/api/v1/runs?limit=0")
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)

    assert process.returncode == 0, log.read_text()[-3000:]
    findings = {f["rule"]: f for f in detail.json()["findings"]}
    assert findings["oom"]["root_cause"] == "Worker 0 failed: out of memory (limit 16Gi)"
    assert "mpijc_jobs" in metrics
    assert hidden.status_code == 404
    assert missing.status_code == 404 and "no run with uid" in missing.json()["detail"]
    assert bad_limit.status_code == 422


def children_of(pid: int) -> dict[int, str]:
    """Live child processes of ``pid``: their command lines, by pid."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and "controller.cli" in cmdline:
            found[int(entry.name)] = cmdline
    return found


def alive(pids: Iterable[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


async def started_children(process: subprocess.Popen[bytes], count: int) -> dict[int, str]:
    """Once ``up`` runs ``count`` children (it starts the API first, the others once it answers)."""

    def started() -> bool:
        assert process.poll() is None, "up exited early"
        return len(children_of(process.pid)) >= count

    await until(
        started, STARTUP_S, lambda: f"up started {len(children_of(process.pid))} children, not {count}", 0.1
    )
    return children_of(process.pid)


async def test_up_runs_each_part_in_its_own_process_and_stops_them_all(
    sim: SimCluster, settings: Settings, tmp_path: Path
) -> None:
    env = cli_env(
        settings,
        tmp_path,
        MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp_path / "kubeconfig")),
        MPIJC_UP__DISPATCHERS="2",  # the default on more than two cores
    )
    env["MPIJC_API__PORT"] = str(free_port())
    log = tmp_path / "up.log"
    process = start_cli(["up"], env, tmp_path, log)
    try:
        children = await started_children(process, 8)  # watchers, 5 consumer roles (2 dispatchers), API
        commands = sorted(cmd.split("controller.cli ", 1)[1].strip() for cmd in children.values())
        assert commands == sorted(
            ["watch", "api"]
            + [f"consume --only {r}" for r in ("history", "rules", "audit", "notify", "dispatch", "dispatch")]
        )
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert process.returncode == 0, log.read_text()[-3000:]
    assert not alive(children), "a child outlived up"


def restarts(metrics: str, part: str) -> float:
    """``mpijc_up_restarts_total{part=...}`` in a /metrics page; 0 when absent."""
    line = f'mpijc_up_restarts_total{{part="{part}"}} '
    return next((float(row.removeprefix(line)) for row in metrics.splitlines() if row.startswith(line)), 0.0)


async def test_a_killed_part_comes_back_and_the_others_run_on(
    sim: SimCluster, settings: Settings, tmp_path: Path
) -> None:
    metrics_port = free_port()
    env = cli_env(
        settings,
        tmp_path,
        MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp_path / "kubeconfig")),
        MPIJC_API__PORT=str(free_port()),
        MPIJC_METRICS__UP_PORT=str(metrics_port),
        MPIJC_UP__RESTART_INITIAL_S="0.2",
        MPIJC_UP__DISPATCHERS="1",
    )
    log = tmp_path / "up.log"
    process = start_cli(["up"], env, tmp_path, log)
    try:
        children = await started_children(process, 7)
        rules = next(pid for pid, cmd in children.items() if cmd.rstrip().endswith("--only rules"))
        os.kill(rules, signal.SIGKILL)

        def back() -> bool:
            now = children_of(process.pid)
            return len(now) == 7 and rules not in now

        await until(back, STARTUP_S, what=lambda: children_of(process.pid))
        again = children_of(process.pid)
        async with httpx.AsyncClient(timeout=5) as scraper:
            page = (await scraper.get(f"http://127.0.0.1:{metrics_port}/metrics")).text
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert process.returncode == 0, log.read_text()[-3000:]
    restarted = {pid: cmd for pid, cmd in again.items() if pid not in children}
    assert [cmd.rstrip().rsplit(" ", 1)[1] for cmd in restarted.values()] == ["rules"]
    assert {pid: cmd for pid, cmd in again.items() if pid in children} == {
        pid: cmd for pid, cmd in children.items() if pid != rules
    }, "the other parts kept running"
    assert restarts(page, "rules") == 1 and restarts(page, "api") == 0
    assert "up: rules exited with status -9" in log.read_text()
    assert not alive([*children, *again]), "a child outlived up"
