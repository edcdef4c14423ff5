"""Every process does its work as its own identity, and nothing its permissions do not allow.

A nats-server runs the rendered configuration (:func:`controller.bus.serverconfig.render`, for
this test's prefix) with the users' passwords in its environment, as the bundled NATS does.
The migrate command declares the streams as ``admin``; the watchers, each consumer role and
the API start as their processes, each connecting as its identity; a job whose worker is
OOM-killed in the (simulated) cluster reaches the history with its finding, and its failure the
audit chain, which takes the watchers, history, rules (partitions, urgent lanes, buckets, warm
start) and audit (lifecycle records published, then appended) through the bus. Then the
server's log holds no permission violation and no refused login: what the roles did was
allowed, and nothing was silently refused.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.server import nats_server_binary
from controller.bus.serverconfig import IDENTITIES, render
from controller.cli.embedded import port_open
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, run_cli, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.stories import oom_in
from tests.pipeline_fixtures import wait_for_sql
from tests.processes import stop

pytestmark = pytest.mark.slow

PASSWORDS = {who.name: "p" + secrets.token_hex(16) for who in IDENTITIES}


@pytest.fixture
def nats_with_users(tmp_path: Path, topology: Topology) -> Iterator[tuple[str, Path]]:
    """A nats-server with the rendered users for ``topology``: its URL and its log."""
    config = tmp_path / "nats.conf"
    config.write_text(render(topology))
    port, log = free_port(), tmp_path / "nats.log"
    local = ["-a", "127.0.0.1", "-p", str(port)]
    env = {who.variable: PASSWORDS[who.name] for who in IDENTITIES}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [nats_server_binary(), "-c", str(config), "-js", "-sd", str(tmp_path / "store"), *local],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while not port_open(port) and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert port_open(port), log.read_text()
        yield f"nats://127.0.0.1:{port}", log
    finally:
        server.terminate()
        server.wait(10)


def _as(settings: Settings, workdir: Path, who: str, url: str, **more: str) -> dict[str, str]:
    return cli_env(
        settings,
        workdir,
        MPIJC_NATS__URL=url,
        MPIJC_NATS__USER=who,
        MPIJC_NATS__PASSWORD=PASSWORDS[who],
        **more,
    )


async def test_each_process_works_as_its_identity_without_a_violation(
    sim: SimCluster,
    settings: Settings,
    engine: AsyncEngine,
    nats_with_users: tuple[str, Path],
    tmp_path: Path,
) -> None:
    url, server_log = nats_with_users
    kubeconfig = str(sim.kubeconfig(tmp_path / "kubeconfig"))
    migrated = run_cli(["migrate"], _as(settings, tmp_path, "admin", url), tmp_path)
    assert migrated.returncode == 0 and "streams declared" in migrated.stdout, migrated.stderr

    roles = {
        "watchers": ["watch"],
        "history": ["consume", "--only", "history"],
        "rules": ["consume", "--only", "rules"],
        "audit": ["consume", "--only", "audit"],
        "notify": ["consume", "--only", "notify"],
        "dispatch": ["consume", "--only", "dispatch"],
        "api": ["api"],
    }
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for who, args in roles.items():
            processes[who] = start_cli(
                args,
                _as(
                    settings,
                    tmp_path,
                    who,
                    url,
                    MPIJC_KUBE__KUBECONFIG=kubeconfig,
                    MPIJC_API__PORT=str(free_port()),
                    MPIJC_API__AUTH="off",
                ),
                tmp_path,
                tmp_path / f"{who}.log",
            )
        job = oom_in(sim, "guarded")
        await wait_for_sql(engine, "SELECT count(*) FROM findings WHERE rule = 'oom'", 1, timeout_s=60)
        await wait_for_sql(engine, "SELECT count(*) FROM runs WHERE name = 'guarded'", 1)
        sim.update(k.with_conditions(sim.get(job), ("Failed", "MPIJobFailed", "2026-11-20T10:09:30Z")))
        # the audit consumer publishes the lifecycle record and appends it to the chain
        await wait_for_sql(
            engine, "SELECT count(*) FROM audit_records WHERE verb = 'failed'", 1, timeout_s=60
        )
        for who, process in processes.items():
            assert process.poll() is None, (who, (tmp_path / f"{who}.log").read_text()[-3000:])
    finally:
        stop(*processes.values())
    refused = [
        line
        for line in server_log.read_text().splitlines()
        if "Violation" in line or "authentication error" in line
    ]
    assert refused == []
