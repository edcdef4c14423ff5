"""Every process's metrics port passes Prometheus's own check and answers the kubelet's probe.

The watchers, a consumer and the API run as their processes (the simulated cluster's OOM-killed
worker gives their series labels and values); ``/metrics`` of each, scraped from its metrics
port, passes ``promtool check metrics`` (Debian's ``prometheus`` package, installed by the test
when missing), and ``/healthz`` there answers 200 while any other path is 404, so a probe of a
wrong path fails instead of passing.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.settings import Settings
from controller.testing.packages import debian_binary
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli
from controller.testing.simcluster import SimCluster
from controller.testing.stories import oom_in
from controller.testing.waits import until
from tests.pipeline_fixtures import wait_for_sql
from tests.processes import stop

pytestmark = pytest.mark.slow

ROLES = {
    "watchers": ["watch"],
    "history": ["consume", "--only", "history"],
    "rules": ["consume", "--only", "rules"],
    "api": ["api"],
}


@pytest.fixture(scope="module")
def promtool() -> Iterator[str]:
    found, why = debian_binary("prometheus", ("promtool",))
    if found is None:
        pytest.skip(why)
    yield found


def check_metrics(promtool: str, exposition: str) -> subprocess.CompletedProcess[str]:
    """``promtool check metrics`` of one scrape (its problems on stdout or stderr)."""
    return subprocess.run(
        [promtool, "check", "metrics"],
        input=exposition,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_promtool_refuses_a_family_exposed_twice(promtool: str) -> None:
    """The check this test relies on catches what the API's scrape once had."""
    twice = (
        "# HELP mpijc_scrape_ok 1 if refreshed.\n# TYPE mpijc_scrape_ok gauge\n"
        'mpijc_scrape_ok{source="database"} 1.0\n'
    ) * 2
    assert check_metrics(promtool, twice).returncode != 0


async def test_every_metrics_port_passes_promtool_and_serves_healthz(
    promtool: str, sim: SimCluster, settings: Settings, engine: AsyncEngine, tmp_path: Path
) -> None:
    kubeconfig = str(sim.kubeconfig(tmp_path / "kubeconfig"))
    ports = {who: free_port() for who in ROLES}
    processes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for who, args in ROLES.items():
            env = cli_env(
                settings,
                tmp_path,
                MPIJC_KUBE__KUBECONFIG=kubeconfig,
                MPIJC_API__PORT=str(free_port()),
                MPIJC_API__AUTH="off",
                MPIJC_METRICS__PORT=str(ports[who]),
            )
            processes[who] = start_cli(args, env, tmp_path, tmp_path / f"{who}.log")
        oom_in(sim, "scraped")
        await wait_for_sql(engine, "SELECT count(*) FROM findings WHERE rule = 'oom'", 1, timeout_s=60)
        async with httpx.AsyncClient(timeout=30) as client:
            for who, port in ports.items():
                base = f"http://127.0.0.1:{port}"

                async def answers(base: str = base) -> bool:
                    try:
                        return (await client.get(f"{base}/healthz")).status_code == 200
                    except httpx.TransportError:
                        return False

                await until(answers, timeout_s=60)
                scraped = await client.get(f"{base}/metrics")
                assert scraped.status_code == 200, who
                assert "mpijc_" in scraped.text, who
                checked = check_metrics(promtool, scraped.text)
                assert checked.returncode == 0, (who, checked.stdout, checked.stderr)
                assert (await client.get(f"{base}/nothing-here")).status_code == 404, who
        for who, process in processes.items():
            assert process.poll() is None, (who, (tmp_path / f"{who}.log").read_text()[-3000:])
    finally:
        stop(*processes.values())
