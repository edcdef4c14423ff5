"""Every command speaks one grammar: ``--help`` in plain text with examples and the exit statuses;
one exit-code table (``controller/cli/exits.py``, documented once in ``docs/cli.md``) that each
command keeps; no traceback for a user's mistake, an unreachable API or Ctrl-C (130), one with
``--debug``."""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.cli import commands
from controller.cli.exits import Exit
from controller.contract.kinds import KINDS
from controller.contract.settings import ClientSettings, Settings
from tests.api_fixtures import T0, insert_runs, run_row
from tests.cli.test_users_read_history_through_the_api import Said
from tests.live_events import GUARD_S, serving

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[tuple[str, ...]]:
    """Every command's words: ``runs``, ``audit verify``, …."""
    found: list[tuple[str, ...]] = []

    def walk(parser: argparse.ArgumentParser, words: tuple[str, ...]) -> None:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers:
            found.append(words)
        for action in subparsers:
            for name, child in action.choices.items():
                walk(child, (*words, name))

    walk(commands._parser(), ())
    return found


COMMANDS = _commands()


@pytest.mark.parametrize("words", COMMANDS, ids=[" ".join(w) for w in COMMANDS])
def test_help_is_plain_text_with_examples_and_the_exit_statuses(
    words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        commands.parse([*words, "--help"])
    text = capsys.readouterr().out

    assert exited.value.code == 0
    assert "``" not in text and ":mod:" not in text, "reST markup in --help"
    examples = text.split("\nexamples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert examples and all(line.startswith("  ") and "mpijob-controller " in line for line in examples)
    for line in examples:  # each example parses as written
        argv = shlex.split(line.split("mpijob-controller ", 1)[1].split("  #", 1)[0])
        argv = list(itertools.takewhile(lambda arg: arg not in {"|", "&&"}, argv))
        if words[0] not in {"replay", "audit"}:  # those name files that do not exist here
            commands.parse(argv)
    statuses = text.split("\nexit status:\n", 1)[1].splitlines()
    assert statuses[0].split()[0] == "0" and statuses[-1].split()[0] == "130"
    assert all(Exit(int(line.split()[0])).meaning in line for line in statuses)


def test_the_exit_statuses_are_documented_once_as_exits_defines_them() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text()
    rows = dict(re.findall(r"^\| (\d+) \| `(\w+)` \|", doc, flags=re.MULTILINE))

    assert rows == {str(int(code)): code.name for code in Exit}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["wait", "train"], "'train' is not NAMESPACE/JOB"),
        (["logs", "team-a/"], "'team-a/' is not NAMESPACE/JOB"),
        (["wait", "team-a/train", "--timeout", "soon"], "'soon' is not a duration"),
        (["runs", "--since", "yesterday"], "neither a duration (2h, 7d) nor an RFC 3339 time"),
        (["runs", "--kind", "Job"], "invalid choice: 'Job'"),
        (["audit", "export", "--until", "2026-11-20T10:00:00"], "has no UTC offset"),
        (["findings", "team-a/pi@0"], "is not a run"),
        (["replay", "/nonexistent/run.jsonl"], "cannot read /nonexistent/run.jsonl: no such file"),
    ],
    ids=["wait-target", "logs-target", "duration", "since", "kind", "until", "attempt", "missing-file"],
)
def test_a_malformed_argument_is_a_usage_error_naming_it(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        commands.parse(argv)

    assert exited.value.code == Exit.USAGE
    assert says in capsys.readouterr().err


def test_every_kind_is_a_choice_of_runs_and_history() -> None:
    for kind in (spec.kind for spec in KINDS):
        assert commands.parse(["runs", "--kind", kind]).kind == kind
        assert commands.parse(["history", "--kind", kind]).kind == kind


@pytest.fixture
async def stored(engine: AsyncEngine) -> None:
    await insert_runs(
        engine,
        [
            run_row("team-a", "pi", T0, attempt=1, phase="Failed"),
            run_row("team-a", "pi", T0 + timedelta(hours=1), attempt=2, phase="Running"),
        ],
    )


CASES = [
    # (command line, token, exit status)
    (["runs", "-n", "team-a"], "token-alice", Exit.OK),
    (["runs", "-n", "team-a"], "token-bob", Exit.REFUSED),
    (["findings", "team-a/pi"], "token-alice", Exit.OK),
    (["findings", "team-a/pi"], "token-bob", Exit.REFUSED),
    (["findings", "team-a/pi@7"], "token-alice", Exit.NOT_FOUND),
    (["findings", "team-a/typo"], "token-alice", Exit.NOT_FOUND),
    (["compare", "team-a/pi@1", "team-a/pi@2"], "token-alice", Exit.OK),
    (["compare", "team-a/pi@1", "team-a/pi@2"], "token-bob", Exit.REFUSED),
    (["compare", "team-a/pi@1", "team-a/typo"], "token-alice", Exit.NOT_FOUND),
    (["compare", "team-a/pi@1"], "token-alice", Exit.USAGE),
    (["wait", "team-a/pi", "--attempt", "1", "--for", "finished"], "token-alice", Exit.OK),
    (["wait", "team-a/pi", "--attempt", "1", "--for", "running"], "token-alice", Exit.FAILED),
    (["wait", "team-a/pi"], "token-bob", Exit.REFUSED),
    (["wait", "team-a/typo"], "token-alice", Exit.NOT_FOUND),
    (["wait", "team-a/pi", "--attempt", "7"], "token-alice", Exit.NOT_FOUND),
    (["wait", "team-a/pi", "--timeout", "0.2s"], "token-alice", Exit.TIMED_OUT),
    (["logs", "team-a/pi"], "token-bob", Exit.REFUSED),
    (["logs", "team-a/typo"], "token-alice", Exit.NOT_FOUND),
    (["logs", "team-a/pi", "--attempt", "7"], "token-alice", Exit.NOT_FOUND),
]


@pytest.mark.parametrize(
    ("argv", "token", "status"),
    CASES,
    ids=[
        f"{' '.join(argv)} as {token.removeprefix('token-')}: {status.name}" for argv, token, status in CASES
    ],
)
async def test_each_api_command_exits_by_the_one_table(
    stored: None,
    engine: AsyncEngine,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    token: str,
    status: Exit,
) -> None:
    settings = Settings(_env_file=None, client=ClientSettings(wait_created_within_s=0))  # type: ignore[call-arg]
    async with serving(engine) as api:
        capsys.readouterr()
        args = commands.parse([*argv, "--api", api.url, "--token", token])
        code = await commands.execute(args, settings)
    said = Said(code, *capsys.readouterr())

    assert said.code == status, said
    assert "Traceback" not in said.err
    if status not in {Exit.OK, Exit.FAILED}:
        last = said.err.strip().splitlines()[-1]
        assert last.startswith(f"mpijob-controller {argv[0]}: ") or "did not reach" in last, said


def as_from_a_terminal() -> None:
    """A ``preexec_fn``: the child takes Ctrl-C (SIGINT) as a foreground process of a terminal
    does — handled by default and not blocked — whatever this test process left for its children."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _cli(*argv: str, **env: str) -> subprocess.Popen[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    return subprocess.Popen(
        [sys.executable, "-m", "controller.cli", *argv],
        env={**clean, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,  # noqa: PLW1509  # signal calls only, before exec
    )


UNREACHABLE = ("--api", "http://127.0.0.1:1", "--token", "t")


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
def test_an_unreachable_api_is_one_line_and_debug_adds_the_traceback(debug: bool) -> None:
    process = _cli("runs", *UNREACHABLE, *(["--debug"] if debug else []))
    _, err = process.communicate(timeout=GUARD_S * 2)

    assert process.returncode == Exit.REFUSED, err
    assert err.strip().splitlines()[-1].startswith("mpijob-controller runs: cannot reach the API at")
    assert ("Traceback" in err) == debug
    if not debug:
        assert len(err.strip().splitlines()) == 1


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT as a terminal's Ctrl-C sends it")
def test_ctrl_c_exits_130_without_a_traceback() -> None:
    """``wait`` on an API that does not answer retries until its timeout: Ctrl-C stops it."""
    with _cli("wait", "team-a/train", *UNREACHABLE) as process:
        assert process.stderr is not None
        first = process.stderr.readline()  # the first "lost the API …; reconnecting": it is waiting
        process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=GUARD_S)
        finally:
            process.kill()  # (no-op once it ended) a wait Ctrl-C did not stop must not outlive the test

    assert "reconnecting" in first
    assert process.returncode == Exit.INTERRUPTED
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


@pytest.mark.parametrize(
    ("line", "offered"),
    [
        ("mpijob-controller lo", {"logs"}),
        ("mpijob-controller runs --kind ", {spec.kind for spec in KINDS}),
        ("mpijob-controller runs -o ", {"table", "wide", "json", "yaml"}),
        ("mpijob-controller wait team-a/train --wait-for", {"--wait-for-creation"}),
    ],
    ids=["command", "kind", "output", "option"],
)
def test_the_shell_completes_commands_options_and_choices(
    line: str, offered: set[str], tmp_path: Path
) -> None:
    """As bash asks argcomplete (``register-python-argcomplete mpijob-controller``)."""
    answer = tmp_path / "completions"
    process = _cli(
        _ARGCOMPLETE="1",
        _ARGCOMPLETE_IFS="\n",
        COMP_LINE=line,
        COMP_POINT=str(len(line)),
        _ARGCOMPLETE_STDOUT_FILENAME=str(answer),
    )
    _, err = process.communicate(timeout=GUARD_S * 2)

    assert process.returncode == 0, err
    assert {word.strip() for word in answer.read_text().splitlines()} == offered
