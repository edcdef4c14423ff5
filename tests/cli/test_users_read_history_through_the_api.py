"""``runs``, ``findings`` and ``compare``: a user reads the history through the API with a bearer
token, never the database. The API runs for real (uvicorn on a loopback port) over this test's
PostgreSQL; each command goes through the command line's own entry (its parser and handler, or the
installed module as a process) and its output is read as a user or a script would."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.limits import DEFAULT_LIMITS, Rate
from controller.cli import commands
from controller.cli.exits import Exit
from controller.contract.settings import Settings
from tests.api_fixtures import ADMIN, T0, bearer, fire, insert_runs, job_story, oom_failed, run_row, store
from tests.live_events import GUARD_S, Served, serving

OOM = "Worker 1 failed: out of memory (limit 16Gi)."


@dataclasses.dataclass(frozen=True)
class Said:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


Cli = Callable[..., Awaitable[Said]]


@pytest.fixture
async def api(engine: AsyncEngine) -> AsyncIterator[Served]:
    async with serving(engine) as served:
        yield served


async def call(capsys: pytest.CaptureFixture[str], *argv: str) -> Said:
    """``mpijob-controller ARGS`` as ``main`` runs it (its parser, then its handler), in this event loop."""
    capsys.readouterr()
    args = commands.parse(argv)
    code = await commands.execute(args, Settings(_env_file=None))  # type: ignore[call-arg]
    said = capsys.readouterr()
    return Said(code, said.out, said.err)


@pytest.fixture
def cli(api: Served, capsys: pytest.CaptureFixture[str]) -> Cli:
    """``mpijob-controller ARGS --api <the served API> --token TOKEN``."""

    async def run(*argv: str, token: str = "token-admin") -> Said:
        return await call(capsys, *argv, "--api", api.url, *(["--token", token] if token else []))

    return run


async def api_json(api: Served, path: str, **params: Any) -> Any:
    async with httpx.AsyncClient(base_url=api.url, timeout=GUARD_S) as client:
        response = await client.get(path, params=params, headers=ADMIN)
    assert response.status_code == 200, response.text
    return response.json()


def columns(table: str) -> list[dict[str, str]]:
    """A table's rows by header, each cell cut at where its header starts: misaligned columns fail."""
    header, *lines = table.splitlines()
    found = list(re.finditer(r"\S+(?: \S+)*", header))  # names hold single spaces: "CREATED (UTC)"
    names, starts = [m.group() for m in found], [m.start() for m in found]
    rows = []
    for line in lines:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        for start in starts[1:]:
            assert line[start - 1] == " ", f"a cell runs into the next column: {line!r}"
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


@pytest.fixture
async def mixed(engine: AsyncEngine) -> list[dict[str, Any]]:
    rows = [
        run_row("team-a", "pi", T0, labels={"exp": "1"}, attempt=1),
        run_row("team-a", "pi", T0 + timedelta(hours=1), phase="Failed", labels={"exp": "2"}, attempt=2),
        run_row("team-a", "bert", T0 + timedelta(hours=2), kind="TrainJob", phase="Running"),
        run_row("team-b", "pi", T0 + timedelta(hours=3), phase="Pending"),
        run_row("shared", "llama", T0 + timedelta(hours=4), kind="TrainJob", labels={"exp": "1"}),
    ]
    await insert_runs(engine, rows)
    return rows


async def test_runs_prints_an_aligned_table_of_what_the_token_may_read(mixed: object, cli: Cli) -> None:
    said = await cli("runs", token="token-alice")

    assert (said.code, said.err) == (0, "")
    rows = columns(said.out)
    assert [(r["NAMESPACE"], r["NAME"], r["ATTEMPT"], r["PHASE"]) for r in rows] == [
        ("team-a", "bert", "1", "Running"),
        ("team-a", "pi", "2", "Failed"),
        ("team-a", "pi", "1", "Succeeded"),
    ]
    assert rows[1]["CREATED (UTC)"] == "2026-11-20 11:00:00"
    assert rows[1]["DURATION"] == "10m00s"  # created → finished, 600 s
    assert rows[0]["DURATION"].endswith(" so far")  # still running: since creation
    assert rows[0]["KIND"] == "TrainJob"


@pytest.mark.parametrize(
    ("argv", "params"),
    [
        ((), {}),
        (("-n", "team-a"), {"namespace": "team-a"}),
        (("--kind", "TrainJob"), {"kind": "TrainJob"}),
        (("--phase", "Failed"), {"phase": "Failed"}),
        (("--name", "pi"), {"name": "pi"}),
        (("-l", "exp=1"), {"label": "exp=1"}),
        (("--since", "2026-11-20T12:00:00Z"), {"created_after": "2026-11-20T12:00:00Z"}),
        (
            ("--since", "2026-11-20T12:00:00+01:00", "--until", "2026-11-20T13:00:00Z"),
            {"created_after": "2026-11-20T11:00:00Z", "created_before": "2026-11-20T13:00:00Z"},
        ),
        (("--since", "1h"), {"created_after": "2999-01-01T00:00:00Z"}),  # none: 2026-11-20 is long ago
        (("--since", "3650d"), {}),
        (
            ("-n", "team-a", "--kind", "MPIJob", "--phase", "Succeeded"),
            {"namespace": "team-a", "kind": "MPIJob", "phase": "Succeeded"},
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else "",
)
async def test_runs_filters_select_what_the_api_selects(
    mixed: object, cli: Cli, api: Served, argv: tuple[str, ...], params: dict[str, str]
) -> None:
    said = await cli("runs", "-o", "json", *argv)

    assert said.code == 0, said.err
    expected = await api_json(api, "/api/v1/runs", **params)
    assert said.json() == expected  # the API's own page: items and next_cursor
    assert said.out == json.dumps(expected, indent=2, sort_keys=True) + "\n"  # stable: keys sorted


async def test_runs_pages_through_the_api_cursor_to_its_limit_and_hands_on_the_rest(
    engine: AsyncEngine, cli: Cli
) -> None:
    rows = [run_row("team-a", f"job-{i}", T0 + timedelta(minutes=i)) for i in range(520)]
    await insert_runs(engine, rows)
    newest_first = [r["uid"] for r in reversed(rows)]

    first = await cli("runs", "-o", "json", "--limit", "510")  # more than one API page (500)
    cursor = first.json()["next_cursor"]
    rest = await cli("runs", "-o", "json", "--limit", "100", "--cursor", cursor)
    table = await cli("runs", "--limit", "3", "--cursor", cursor)

    assert [r["uid"] for r in first.json()["items"]] == newest_first[:510]
    assert [r["uid"] for r in rest.json()["items"]] == newest_first[510:]
    assert rest.json()["next_cursor"] is None
    assert [r["UID"] for r in columns(table.out)] == newest_first[510:513]
    assert table.err.startswith("more runs: add --cursor ")


async def test_findings_of_a_job_show_the_root_cause_and_what_to_do(
    engine: AsyncEngine, cli: Cli, api: Served
) -> None:
    failed = await oom_failed(engine, OOM)
    succeeded, story = job_story("train", start=T0 + timedelta(hours=1))
    await store(engine, story)

    by_attempt = await cli("findings", "team-a/train@1", token="token-alice")
    newest = await cli("findings", "team-a/train", token="token-alice")
    by_uid = await cli("findings", failed, "-o", "json")

    assert by_attempt.code == 0, by_attempt.err
    title, table, *after = by_attempt.out.splitlines()
    assert title == f"team-a/train attempt 1 (MPIJob, Failed) uid {failed}"
    [row] = columns("\n".join([table, after[0]]))
    assert (row["SEVERITY"], row["STATUS"], row["RULE"], row["ROOT CAUSE"]) == (
        "critical",
        "firing",
        "oom",
        OOM,
    )
    assert row["FIRST SEEN (UTC)"] == "2026-11-20 10:10:00"
    assert after[1:] == [
        "",
        "oom: what to do",
        "  - Increase worker memory.",
        "  see docs/troubleshooting.md#oom",
    ]
    assert newest.out.splitlines() == [
        f"team-a/train attempt 2 (MPIJob, Succeeded) uid {succeeded}",
        "no findings",
    ]
    assert by_uid.json()["items"] == (await api_json(api, f"/api/v1/runs/{failed}/findings"))["items"]
    assert by_uid.json()["run"]["uid"] == failed and "spec" not in by_uid.json()["run"]


async def test_compare_puts_two_attempts_side_by_side(engine: AsyncEngine, cli: Cli, api: Served) -> None:
    failed, story = job_story("train", workers=2, memory="16Gi", outcome="Failed", oom_worker=1)
    await store(engine, story)
    await fire(engine, failed, "team-a", "train", "oom", OOM, T0)
    succeeded, story = job_story("train", workers=3, memory="32Gi", start=T0 + timedelta(hours=1), restarts=1)
    await store(engine, story)

    table = await cli("compare", "team-a/train@1", "team-a/train", token="token-alice")
    as_json = await cli("compare", failed, succeeded, "-o", "json")

    assert table.code == 0, table.err
    lines = table.out.splitlines()
    header = lines[0]
    first, second = header.index("#1"), header.index("#2")
    grid = {
        line[:first].strip(): [line[first:second].strip(), line[second:].strip()]
        for line in lines[
            1 : lines.index("* differs; 12 other spec fields are the same (--all-spec shows them)")
        ]
        if line.strip()
    }
    assert grid["UID"] == [failed, succeeded]
    assert grid["OUTCOME"] == ["Failed", "Succeeded"]
    assert grid["TOTAL"] == ["10m00s", "10m00s"]
    assert grid["QUEUED"] == ["30s", "30s"]
    assert grid["TO ALL WORKERS RUNNING"] == ["25s", "30s"]
    assert grid["RESTARTS"] == ["0", "4"]  # launcher and three workers restarted once each
    assert grid["TERMINATIONS"] == ["worker-1:OOMKilled(137)", "-"]
    assert grid["FAILURE CAUSES"] == ["oom", "-"]
    assert grid["* workers"] == ["2", "3"]
    assert grid["* worker.resources.limits.memory"] == ["16Gi", "32Gi"]
    assert "  worker.image" not in grid  # the same in both: shown with --all-spec only
    assert lines[-1] == f"#1 oom (critical): {OOM}"
    assert as_json.json() == await api_json(api, "/api/v1/compare", runs=f"{failed},{succeeded}")


async def only_line(said: Said) -> str:
    assert said.out == ""
    [line] = said.err.splitlines()
    return line


@pytest.mark.parametrize(
    ("argv", "token", "expected"),
    [
        (("runs",), "not-a-token", "mpijob-controller runs: HTTP 401: "),
        (("runs", "-n", "team-a"), "token-bob", "mpijob-controller runs: HTTP 403: "),
        (
            ("findings", "0b7e0c1e-0000-4000-8000-000000000000"),
            "token-admin",
            "mpijob-controller findings: HTTP 404: no run with uid",
        ),
        (
            ("findings", "team-a/pi@9"),
            "token-admin",
            "mpijob-controller findings: no attempt 9 of team-a/pi that this token may read",
        ),
        (("findings", "team-a/pi"), "token-bob", "mpijob-controller findings: HTTP 403: "),
        (("compare", "team-a/pi@1", "team-a/pi@2"), "token-bob", "mpijob-controller compare: HTTP 403: "),
        (
            ("compare", "team-a/pi@1", "team-a/pi@1"),
            "token-admin",
            "mpijob-controller compare: each run may appear once",
        ),
        (("compare", "team-a/pi"), "token-admin", "mpijob-controller compare: give 2 to 5 runs, not 1"),
        (
            ("runs", "-n", "Team_A"),
            "token-admin",
            "mpijob-controller runs: HTTP 422: namespace: Value error, 'Team_A' is not a valid",
        ),
        (("runs", "-l", "no equals sign"), "token-admin", "mpijob-controller runs: HTTP 422: label."),
        (
            ("runs",),
            "two words",
            "mpijob-controller runs: --token or MPIJC_CLIENT__TOKEN: the token holds spaces",
        ),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else "",
)
async def test_a_refusal_is_one_line_and_a_non_zero_exit(
    mixed: object, cli: Cli, argv: tuple[str, ...], token: str, expected: str
) -> None:
    said = await cli(*argv, token=token)

    assert said.code != 0
    assert (await only_line(said)).startswith(expected), said.err


async def test_an_api_that_does_not_answer_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unreachable = await call(capsys, "runs", "--api", "http://127.0.0.1:1", "--token", "token-admin")
    no_token = await call(capsys, "findings", "team-a/pi", "--token-file", str(tmp_path / "absent"))

    assert unreachable.code == no_token.code == Exit.REFUSED
    assert (await only_line(unreachable)).startswith(
        "mpijob-controller runs: cannot reach the API at http://127.0.0.1:1: ConnectError"
    )
    assert await only_line(no_token) == (
        f"mpijob-controller findings: MPIJC_CLIENT__TOKEN_FILE: cannot read {tmp_path / 'absent'}: "
        "No such file or directory"
    )


async def test_a_busy_api_is_asked_again_when_it_says_when(
    engine: AsyncEngine, capsys: pytest.CaptureFixture[str]
) -> None:
    """One request a second for the token: the second request of ``findings`` (the job's runs, then
    the run) is a 429 with ``Retry-After``, and is asked again then."""
    await insert_runs(engine, [run_row("team-a", "pi", T0)])
    slow = dataclasses.replace(DEFAULT_LIMITS, per_token=Rate(per_s=1, burst=1))
    async with serving(engine, api_limits=slow) as api:
        said = await call(capsys, "findings", "team-a/pi", "--api", api.url, "--token", "token-admin")

    assert (said.code, said.err) == (0, "")
    assert said.out.startswith("team-a/pi attempt 1 (MPIJob, Succeeded) uid ")


async def test_the_installed_command_reads_its_token_from_the_environment_or_a_file(
    mixed: list[dict[str, Any]], api: Served, tmp_path: Path
) -> None:
    """``python -m controller.cli``, as a pipeline step runs it: ``MPIJC_CLIENT__TOKEN`` (a CI secret),
    or a service account's token file, which an explicit ``--token-file`` prefers to the variable."""
    token_file = tmp_path / "token"
    token_file.write_text("token-alice\n")
    env = {**os.environ, "MPIJC_CLIENT__API_URL": api.url, "MPIJC_CLIENT__TOKEN": "token-admin"}

    async def run(*argv: str) -> Said:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "controller.cli", *argv, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), GUARD_S * 2)
        assert process.returncode is not None
        return Said(process.returncode, out.decode(), err.decode())

    as_admin = await run("runs", "-o", "json")
    as_alice = await run("runs", "-o", "json", "--token-file", str(token_file))

    assert as_admin.code == 0, as_admin.err
    assert {r["uid"] for r in as_admin.json()["items"]} == {r["uid"] for r in mixed}
    assert as_alice.code == 0, as_alice.err
    assert {r["namespace"] for r in as_alice.json()["items"]} == {"team-a"}


def test_the_user_commands_send_the_token_they_are_given(tmp_path: Path) -> None:
    """The header a command sends: the literal token wins over the file, each option over its variable."""
    from controller.cli.apiclient import client_of
    from controller.client.connection import authorization
    from controller.contract.settings import ClientSettings

    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    configured = ClientSettings(token_file="/nonexistent", token="from-env")  # type: ignore[arg-type]

    def sent(*argv: str) -> dict[str, str]:
        return authorization(client_of(configured, commands.parse(["runs", *argv])))

    assert sent("--token", "from-flag") == bearer("from-flag")
    assert sent("--token-file", str(token_file)) == bearer("from-file")
    assert sent() == bearer("from-env")
