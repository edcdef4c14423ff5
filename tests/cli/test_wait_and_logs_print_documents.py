"""``wait`` and ``logs`` speak ``-o json|yaml`` as the other commands do: ``wait`` its outcome as one
document (the run, its phase, the exit status and its meaning, the findings), ``logs`` each line
as JSON Lines or the items of one YAML list; ``logs`` on an attempt with no stored line says so on
stderr; Ctrl-C on ``logs --follow`` exits 130 without a traceback."""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
from pathlib import Path

import pytest
import yaml
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.logs import RunLogs
from controller.cli import waiting
from controller.cli.exits import Exit
from controller.cli.logs import print_logs
from controller.contract.settings import ClientSettings
from tests.api_fixtures import T0, insert_runs, run_row
from tests.cli.test_every_command_speaks_one_grammar import as_from_a_terminal
from tests.conftest import Stage
from tests.live_events import GUARD_S, serving
from tests.log_fixtures import run_with_logs


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text("token-alice\n")
    return path


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_wait_prints_its_outcome_as_one_document(
    engine: AsyncEngine, token_file: Path, output: str
) -> None:
    await insert_runs(
        engine, [run_row("team-a", "pi", T0, uid="0c0ffee0-0000-4000-8000-000000000001", phase="Failed")]
    )
    out, err = io.StringIO(), io.StringIO()
    async with serving(engine) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        status = await waiting.wait("team-a/pi", client, goal="finished", output=output, out=out, err=err)
    document = json.loads(out.getvalue()) if output == "json" else yaml.safe_load(out.getvalue())

    assert status == Exit.OK, err.getvalue()
    assert document["run"] == {
        "namespace": "team-a",
        "name": "pi",
        "attempt": 1,
        "uid": "0c0ffee0-0000-4000-8000-000000000001",
    }
    assert document["phase"] == "Failed"
    assert document["exit"] == {"code": 0, "name": "OK", "meaning": Exit.OK.meaning}
    assert document["findings"] == []
    assert "team-a/pi attempt 1 is Failed" in err.getvalue()  # the lines a person reads: on stderr


@pytest.mark.parametrize("output", ["json", "yaml"])
async def test_logs_prints_json_lines_or_a_yaml_list(
    stage: Stage,
    token_file: Path,
    output: str,
) -> None:
    await run_with_logs(stage)
    out = io.StringIO()
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        assert await print_logs("team-a/llm", client, output=output, out=out) == Exit.OK
    if output == "json":
        entries = [json.loads(line) for line in out.getvalue().splitlines()]
    else:
        entries = yaml.safe_load(out.getvalue())

    assert [entry["text"] for entry in entries][:2] == ["sshd: accepted", "[1,0]<stdout>:step 1 loss 2.0"]
    assert len(entries) == 6
    assert entries[0]["at"].endswith(("Z", "+00:00"))


async def test_logs_of_an_attempt_with_no_stored_line_says_so(stage: Stage, token_file: Path) -> None:
    await insert_runs(stage.engine, [run_row("team-a", "quiet", T0, phase="Succeeded")])
    out, err = io.StringIO(), io.StringIO()
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        client = ClientSettings(api_url=api.url, token_file=str(token_file))
        status = await print_logs("team-a/quiet", client, out=out, err=err)

    assert status == Exit.OK
    assert out.getvalue() == ""
    assert err.getvalue() == "logs: no lines are stored for team-a/quiet attempt 1\n"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT as a terminal's Ctrl-C sends it")
async def test_ctrl_c_on_logs_follow_exits_130_without_a_traceback(stage: Stage) -> None:
    await insert_runs(stage.engine, [run_row("team-a", "quiet", T0, phase="Running")])
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    async with serving(stage.engine, run_logs=RunLogs(stage.js, stage.topology)) as api:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "controller.cli", "logs", "team-a/quiet", "--follow"),
            *("--api", api.url, "--token", "token-alice"),
            env=clean,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=as_from_a_terminal,  # signal calls only, before exec
        )
        assert process.stderr is not None
        first = await asyncio.wait_for(process.stderr.readline(), GUARD_S)  # it is following now
        process.send_signal(signal.SIGINT)
        _, rest = await asyncio.wait_for(process.communicate(), GUARD_S)

    assert b"following new ones" in first, first
    assert process.returncode == Exit.INTERRUPTED
    assert b"Traceback" not in rest and b"KeyboardInterrupt" not in rest, rest


@pytest.mark.parametrize("output", ["table", "json", "yaml"])
async def test_history_speaks_the_one_time_and_duration_form(engine: AsyncEngine, output: str) -> None:
    """``history`` prints the runs as ``runs`` does (created → finished, 10m00s), or one document
    with RFC 3339 UTC times."""
    from controller.cli import report

    await insert_runs(engine, [run_row("team-h", "pi", T0, phase="Failed")])
    async with engine.connect() as conn:
        printed = await report.history(conn, namespace="team-h", output=output)

    if output == "table":
        first = printed.splitlines()[1].split()
        assert first[:7] == ["team-h", "pi", "1", "MPIJob", "Failed", "2026-11-20", "10:00:00"]
        assert first[7] == "10m00s"
        return
    document = json.loads(printed) if output == "json" else yaml.safe_load(printed)
    (run,) = document["items"]
    assert (run["created_at"], run["finished_at"]) == ("2026-11-20T10:00:00Z", "2026-11-20T10:10:00Z")
    assert {"pods", "findings", "timeline"} <= run.keys()
