"""``mpijob-controller logs NAMESPACE/JOB``: a run's lines through the API with a bearer token,
merged by time and rank-labelled, filtered with ``--grep``, the attempt chosen with ``--attempt``,
new lines printed with ``--follow`` (resumed after an API restart); not found (4) for no such attempt,
refused (3) when the API refuses."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from controller.api.logs import RunLogs
from controller.cli import commands
from controller.cli.exits import Exit
from controller.cli.logs import print_logs
from controller.client import ClientError
from controller.contract.settings import ClientSettings
from controller.testing.waits import until
from tests.conftest import Stage
from tests.live_events import GUARD_S, serving
from tests.log_fixtures import log_batch, run_with_logs


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("token-alice\n")
    return path


async def test_the_latest_attempt_is_printed_merged_and_rank_labelled(stage: Stage, token_file: Path) -> None:
    await run_with_logs(stage)
    out, err = io.StringIO(), io.StringIO()
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        status = await print_logs("team-a/llm", client, out=out, err=err)
        grepped = io.StringIO()
        assert await print_logs("team-a/llm", client, grep="sshd|CUDA", out=grepped) == Exit.OK
    assert status == Exit.OK, err.getvalue()
    assert out.getvalue().splitlines() == [
        "2026-11-20 10:00:00.500 llm-worker-1 sshd: accepted",
        "2026-11-20 10:00:01.000 llm-launcher[rank 0] [1,0]<stdout>:step 1 loss 2.0",
        "2026-11-20 10:00:02.000 llm-worker-0 sshd: accepted",
        "2026-11-20 10:00:02.500 llm-worker-1 CUDA error: an illegal memory access",
        "2026-11-20 10:00:03.000 llm-launcher[rank 1] [1,1]<stdout>:step 2 NCCL WARN retry",
        "2026-11-20 10:00:03.000 llm-worker-0 orted started",
    ]
    assert [line.split(" ", 3)[2] for line in grepped.getvalue().splitlines()] == [
        "llm-worker-1",
        "llm-worker-0",
        "llm-worker-1",
    ]


async def test_follow_prints_new_lines_once(stage: Stage, token_file: Path) -> None:
    uid = await run_with_logs(stage)
    out = io.StringIO()
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        task = asyncio.create_task(print_logs("team-a/llm", client, follow=True, out=out))
        await until(lambda: len(out.getvalue().splitlines()) == 6, GUARD_S, out.getvalue)
        later = log_batch(
            uid, "llm-worker-0", "worker", [(3.0, None, "orted started"), (4.0, None, "step 3")]
        )
        await stage.publish_logs([later])
        await until(lambda: "step 3" in out.getvalue(), GUARD_S, out.getvalue)
        task.cancel()
    lines = out.getvalue().splitlines()
    assert lines[-1] == "2026-11-20 10:00:04.000 llm-worker-0 step 3"
    assert sum("orted started" in line for line in lines) == 1


async def test_ignore_case_keeps_lines_of_either_case(stage: Stage, token_file: Path) -> None:
    await run_with_logs(stage)
    exact, either = io.StringIO(), io.StringIO()
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        assert await print_logs("team-a/llm", client, grep="cuda|nccl", out=exact) == Exit.OK
        assert (
            await print_logs("team-a/llm", client, grep="cuda|nccl", ignore_case=True, out=either) == Exit.OK
        )
    assert exact.getvalue() == ""
    assert [
        line.endswith(("CUDA error: an illegal memory access", "NCCL WARN retry"))
        for line in either.getvalue().splitlines()
    ] == [True, True]


async def test_follow_resumes_after_an_api_restart(stage: Stage, token_file: Path) -> None:
    uid = await run_with_logs(stage)
    out, err = io.StringIO(), io.StringIO()
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        task = asyncio.create_task(print_logs("team-a/llm", client, follow=True, out=out, err=err))
        await until(lambda: len(out.getvalue().splitlines()) == 6, GUARD_S, out.getvalue)
        await api.stop()  # the API goes away while the job logs on
        later = log_batch(uid, "llm-worker-0", "worker", [(4.0, None, "step 3"), (5.0, None, "step 4")])
        await stage.publish_logs([later])
        await until(lambda: "reconnecting" in err.getvalue(), GUARD_S, err.getvalue)
        await api.start()  # on the same port, as a restarted pod behind its Service
        await until(lambda: "step 4" in out.getvalue(), GUARD_S, out.getvalue)
        task.cancel()
    lines = out.getvalue().splitlines()
    assert lines[-2:] == [
        "2026-11-20 10:00:04.000 llm-worker-0 step 3",
        "2026-11-20 10:00:05.000 llm-worker-0 step 4",
    ]
    assert len(lines) == len(set(lines)) == 8


@pytest.mark.parametrize(
    ("target", "attempt", "token", "status", "says"),
    [
        ("team-a/llm", 7, "token-alice", Exit.NOT_FOUND, "no attempt 7 of team-a/llm"),
        ("team-a/other", None, "token-alice", Exit.NOT_FOUND, "no run of team-a/other"),
        ("team-a/llm", None, "token-bob", Exit.REFUSED, "HTTP 403"),
    ],
    ids=["no-such-attempt", "no-such-job", "not-allowed"],
)
async def test_what_cannot_be_printed_says_why(
    stage: Stage,
    tmp_path: Path,
    target: str,
    attempt: int | None,
    token: str,
    status: Exit,
    says: str,
) -> None:
    await run_with_logs(stage)
    token_file = tmp_path / "token"
    token_file.write_text(token)
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        with pytest.raises(ClientError, match=says) as raised:
            await print_logs(target, client, attempt=attempt, out=io.StringIO(), err=io.StringIO())
    assert raised.value.status == status


def test_a_malformed_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        commands.parse(["logs", "llm"])
    assert exited.value.code == Exit.USAGE
    assert "'llm' is not NAMESPACE/JOB" in capsys.readouterr().err
