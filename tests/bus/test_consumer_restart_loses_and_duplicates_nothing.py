"""Kill -9 the consumer process mid-stream, start it again: every event is stored exactly once."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from pathlib import Path

import pytest
from sqlalchemy import select

from controller.contract.settings import Settings
from controller.store.models import K8sEventRow, PodStateRow, Run
from controller.testing.drills import rows_in
from controller.testing.processes import cli_env, start_cli
from controller.testing.stories import oom_story
from tests.conftest import Stage

pytestmark = pytest.mark.slow


def start_consumer(settings: Settings, tmp_path: Path, log_name: str) -> subprocess.Popen[bytes]:
    env = cli_env(settings, tmp_path, MPIJC_CONSUMER__BATCH_SIZE="20", MPIJC_CONSUMER__ACK_WAIT_S="2")
    return start_cli(["consume"], env, tmp_path, tmp_path / log_name)


async def test_consumer_killed_mid_stream_resumes_without_loss_or_duplicates(
    stage: Stage,
    tmp_path: Path,
) -> None:
    stories = [oom_story(name=f"job-{i}") for i in range(60)]
    observations = [o for story in stories for o in story]
    await stage.feed(observations)

    first = start_consumer(stage.settings, tmp_path, "first.log")
    try:
        for _ in range(600):  # until part of the stream is stored
            if await rows_in(stage.engine, PodStateRow) > 100:
                break
            await asyncio.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
    partial = await rows_in(stage.engine, PodStateRow)
    pod_observations = sum(1 for o in observations if o.kind == "pod")
    assert 0 < partial < pod_observations, "the kill must land mid-stream"

    second = start_consumer(stage.settings, tmp_path, "second.log")
    try:
        await stage.consumed()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(20)
    assert second.returncode == 0, (tmp_path / "second.log").read_text()[-2000:]

    assert await rows_in(stage.engine, PodStateRow) == pod_observations
    assert await rows_in(stage.engine, Run) == len(stories)
    assert await rows_in(stage.engine, K8sEventRow) == len(stories)
    async with stage.engine.connect() as conn:
        phases = set((await conn.execute(select(Run.phase))).scalars())
    assert phases == {"Failed"}
