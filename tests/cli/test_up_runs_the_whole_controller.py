"""``mpijob-controller up`` as a person starts it: the API, the watchers and the consumer roles in
five processes (history and rules together, the roles off a failure's path together at a lower
priority, the second dispatcher apart), against a (simulated) cluster from a kubeconfig; a job created there shows
up in the API with its finding; a child that dies is started again, counted, while the others run
on; and ``up`` stops every child on SIGTERM.

The module's tests share one ``up`` (starting its Python processes is what these tests cost):
they run in file order on one worker, the last one stopping it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from controller.contract.subjects import Topology
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.stories import oom_in
from controller.testing.waits import STARTUP_S, until
from tests.conftest import Services, fresh_database, prefixed_nats, settings_for
from tests.history.test_end_to_end_watch_to_history import kubeconfig
from tests.kube_fixtures import BOOKMARK_INTERVAL_S

pytestmark = pytest.mark.slow  # one worker runs them, in file order (tests/conftest.py)

PARTS = 5
"""The children of the shared ``up``: API, watchers, history and rules, audit notify and dispatch,
the second dispatcher."""
SHARED = "consume --only history --only rules"
BACKGROUND = "consume --only audit --only notify --only dispatch"


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
    oom_in(sim, name)
    runs = await eventually(
        client, "/api/v1/runs?namespace=team-a", lambda body: [r["name"] for r in body["items"]] == [name]
    )
    uid = runs.json()["items"][0]["uid"]
    detail = await eventually(
        client, f"/api/v1/runs/{uid}", lambda body: any(f["rule"] == "oom" for f in body["findings"])
    )
    return uid, detail


@dataclass(frozen=True)
class Up:
    """The module's ``up``: its process and log, the cluster it watches, where it serves."""

    process: subprocess.Popen[bytes]
    log: Path
    sim: SimCluster
    api_port: int
    metrics_port: int
    up_port: int


@pytest.fixture(scope="module")
async def up(
    services: Services, template_database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Up]:
    """One ``up`` for the module, on a database and a stream prefix of its own: two dispatchers
    (the default on more than two cores), a quick restart, auth off (a local single-user start;
    auth itself is tested elsewhere)."""
    tmp = tmp_path_factory.mktemp("up")
    topology = Topology(prefix=f"t{uuid.uuid4().hex[:10]}")
    async with fresh_database(services) as url, prefixed_nats(services, topology):
        with SimCluster(bookmark_interval_s=BOOKMARK_INTERVAL_S) as sim:
            ports = free_port(), free_port(), free_port()
            env = cli_env(
                settings_for(services, url, topology),
                tmp,
                MPIJC_KUBE__KUBECONFIG=str(kubeconfig(sim, tmp / "kubeconfig")),
                MPIJC_API__PORT=str(ports[0]),
                MPIJC_METRICS__PORT=str(ports[1]),
                MPIJC_METRICS__UP_PORT=str(ports[2]),
                MPIJC_API__AUTH="off",
                MPIJC_UP__RESTART_INITIAL_S="0.2",
                MPIJC_UP__DISPATCHERS="2",
            )
            log = tmp / "up.log"
            process = start_cli(["up"], env, tmp, log)
            try:
                yield Up(process, log, sim, *ports)
            finally:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    process.wait(60)


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
    """Once ``up`` runs ``count`` children (history+rules and the API first, the others once it answers)."""

    def started() -> bool:
        assert process.poll() is None, "up exited early"
        return len(children_of(process.pid)) >= count

    await until(
        started, STARTUP_S, lambda: f"up started {len(children_of(process.pid))} children, not {count}", 0.1
    )
    return children_of(process.pid)


async def test_up_runs_the_consumer_roles_in_two_processes_and_each_other_part_in_its_own(up: Up) -> None:
    expected = sorted(["api", "watch", SHARED, BACKGROUND, "consume --only dispatch"])

    def commands() -> list[str]:
        children = children_of(up.process.pid)
        return sorted(cmd.split("controller.cli ", 1)[1].strip() for cmd in children.values())

    # the parts start one after another (history+rules and the API first) and one may be restarting: wait for the set
    await until(lambda: commands() == expected, STARTUP_S, what=commands, interval_s=0.1)
    await asyncio.sleep(1)
    assert commands() == expected  # and they stay


def nice_of(pid: int) -> int:
    """A process's nice value (``/proc/<pid>/stat``, field 19)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[16])


async def test_up_runs_the_parts_off_a_failures_path_at_a_lower_priority(up: Up) -> None:
    children = await started_children(up.process, PARTS)
    own = nice_of(up.process.pid)

    commands = {pid: cmd.split("controller.cli ", 1)[1].strip() for pid, cmd in children.items()}
    lowered = sorted(cmd for pid, cmd in commands.items() if nice_of(pid) > own)
    as_up = sorted(cmd for pid, cmd in commands.items() if nice_of(pid) == own)

    assert lowered == [BACKGROUND, "consume --only dispatch"]
    assert as_up == ["api", SHARED, "watch"]


async def test_up_watches_stores_and_serves(up: Up) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{up.api_port}", timeout=5) as client:
        await eventually(client, "/healthz", lambda body: body == {"status": "ok"})
        _, detail = await oom_killed_run(client, up.sim, "served")
        async with httpx.AsyncClient(timeout=5) as scraper:
            metrics = (await scraper.get(f"http://127.0.0.1:{up.metrics_port}/metrics")).text
        hidden = await client.get("/metrics")
        missing = await client.get("/api/v1/runs/no-such-uid")
        bad_limit = await client.get("/api/v1/runs?limit=0")

    findings = {f["rule"]: f for f in detail.json()["findings"]}
    assert findings["oom"]["root_cause"] == "Worker 0 failed: out of memory (limit 16Gi)"
    assert "mpijc_jobs" in metrics
    assert hidden.status_code == 404
    assert missing.status_code == 404 and "no run with uid" in missing.json()["detail"]
    assert bad_limit.status_code == 422


def restarts(metrics: str, part: str) -> float:
    """``mpijc_up_restarts_total{part=...}`` in a /metrics page; 0 when absent."""
    line = f'mpijc_up_restarts_total{{part="{part}"}} '
    return next((float(row.removeprefix(line)) for row in metrics.splitlines() if row.startswith(line)), 0.0)


async def test_a_killed_part_comes_back_and_the_others_run_on(up: Up) -> None:
    children = await started_children(up.process, PARTS)
    shared = next(pid for pid, cmd in children.items() if cmd.rstrip().endswith(SHARED))
    os.kill(shared, signal.SIGKILL)

    def back() -> bool:
        now = children_of(up.process.pid)
        return len(now) == PARTS and shared not in now

    await until(back, STARTUP_S, what=lambda: children_of(up.process.pid))
    again = children_of(up.process.pid)
    async with httpx.AsyncClient(timeout=5) as scraper:
        page = (await scraper.get(f"http://127.0.0.1:{up.up_port}/metrics")).text
    restarted = {pid: cmd for pid, cmd in again.items() if pid not in children}
    assert [cmd.split("controller.cli ", 1)[1].strip() for cmd in restarted.values()] == [SHARED]
    assert {pid: cmd for pid, cmd in again.items() if pid in children} == {
        pid: cmd for pid, cmd in children.items() if pid != shared
    }, "the other parts kept running"
    assert restarts(page, "history+rules") == 1 and restarts(page, "api") == 0
    assert "up: history+rules exited with status -9" in up.log.read_text()


async def test_up_stops_every_part_on_sigterm(up: Up) -> None:
    """The module's last test: it stops the shared ``up``."""
    children = await started_children(up.process, PARTS)
    up.process.send_signal(signal.SIGTERM)
    up.process.wait(60)
    assert up.process.returncode == 0, up.log.read_text()[-3000:]
    assert not alive(children), "a child outlived up"
