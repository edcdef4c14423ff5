"""The README's main job, run as a person runs it: every scenario file ends up in the history."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.kinds import kind_named
from controller.contract.settings import Settings
from controller.store.models import Run
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, run_cli
from tests.conftest import SCENARIOS

pytestmark = pytest.mark.slow


def scenario_jobs() -> dict[str, str]:
    """(namespace/name → last phase-bearing kind) of every job in the scenario files."""
    jobs: dict[str, str] = {}
    for path in SCENARIOS.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            obj = json.loads(line)["object"]
            if kind_named(obj["kind"]) is not None:
                jobs[f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"] = obj["kind"]
    return jobs


@pytest.mark.parametrize("nats", ["configured", "embedded"])
async def test_demo_command_stores_and_prints_every_scenario_job(
    settings: Settings, engine: AsyncEngine, tmp_path: Path, nats: str
) -> None:
    env = cli_env(settings, tmp_path)
    if nats == "embedded":  # as `make demo` runs it: each part as its identity, with its password
        del env["MPIJC_NATS__URL"]
        env["MPIJC_EMBEDDED__NATS_PORT"] = str(free_port())
    result = run_cli(["demo"], env, tmp_path)

    assert result.returncode == 0, result.stderr[-3000:]
    expected = scenario_jobs()
    lines = sum(len(p.read_text().splitlines()) for p in SCENARIOS.glob("*.jsonl"))
    assert f"replayed {lines} records" in result.stdout
    for job in expected:
        assert f"== {job} (" in result.stdout
    async with engine.connect() as conn:
        stored = {f"{r.namespace}/{r.name}": r.phase for r in (await conn.execute(select(Run))).all()}
    assert set(stored) == set(expected)
    assert stored["team-a/pi"] == "Failed"
    assert "Succeeded" in stored.values() and "Pending" in stored.values()
    # deliveries reached the demo's own receivers, signed, and the audit chain verifies
    assert "0 rejected" in result.stdout and " x finding.firing" in result.stdout
    assert (
        "ml-team@example.com: [mpijob-controller] [critical] team-a/llm-sft-13b: Worker 2 failed: out of memory"
        in (result.stdout)
    )
    assert (  # a lifecycle record per finished job, and team-a/train's first attempt deleted
        "== audit trail: 22 records; ok: 22 records" in result.stdout
    )
    # quiet but not silent: no line per mail or request of the test doubles, progress while it waits
    assert "mail.log" not in result.stderr and "httpx" not in result.stderr
    assert "catching up:" in result.stdout and "demo --serve" in result.stdout
    # the scenarios' times moved to end a minute ago (a story of about two hours): "--since 7d" finds them
    days = {f"{datetime.now(UTC) - timedelta(hours=hours):%Y-%m-%d}" for hours in (0, 3)}
    assert any(f"  {day} " in result.stdout for day in days)
    assert "2026-11-20" not in result.stdout
    if nats == "embedded":
        users = tmp_path / "nats" / "users"
        assert not [
            line for line in (tmp_path / "nats" / "nats.log").read_text().splitlines() if "Violation" in line
        ]
        for password in (path.read_text().strip() for path in users.iterdir()):
            assert password not in result.stdout + result.stderr
