"""A newcomer's path: after the demo, every command the README's "Using it", docs/pipelines.md and
docs/logs.md show runs as it is written on the demo's data, served by ``demo --serve``.

Each ``sh`` block of those files is marked by the HTML comment before it: ``<!-- runs-on-demo -->``
(optionally ``exit=N``: what each of its commands exits with, 0 by default) or
``<!-- not-run: why -->`` (a cluster, or the demo itself). A ``text`` block marked
``<!-- demo-output -->`` right after a runnable block holds lines its commands print: each must
appear in what they printed, times aside (the demo's times are relative to when it ran).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controller.contract.settings import ClientSettings, Settings
from controller.testing.ports import free_port
from controller.testing.processes import cli_env, start_cli
from controller.testing.waits import STARTUP_S

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "docs" / "pipelines.md", ROOT / "docs" / "logs.md"]
_BLOCK = re.compile(r"(?:<!--\s*(?P<mark>[^>]*?)\s*-->\s*\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.DOTALL)
_TIME = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d)?")


@dataclass
class Block:
    """A runnable ``sh`` block: where it is, its commands, their exit status, the output shown."""

    where: str
    commands: list[str]
    exit: int = 0
    shown: list[str] = field(default_factory=list)


def blocks(path: Path) -> tuple[list[Block], list[str]]:
    """The runnable blocks of ``path``, and the places of ``sh`` blocks that carry no mark."""
    text = path.read_text()
    runnable: list[Block] = []
    unmarked: list[str] = []
    for match in _BLOCK.finditer(text):
        mark, lang, body = match["mark"] or "", match["lang"], match["body"]
        where = f"{path.name}:{text.count(chr(10), 0, match.start('body'))}"
        if lang == "sh":
            if mark.startswith("runs-on-demo"):
                status = re.search(r"exit=(\d+)", mark)
                commands = [line for line in body.splitlines() if line.strip() and not line.startswith("#")]
                runnable.append(Block(where, commands, int(status[1]) if status else 0))
            elif not mark.startswith("not-run:"):
                unmarked.append(where)
        elif lang == "text" and mark == "demo-output":
            assert runnable, f"{where}: demo output after no runnable block"
            runnable[-1].shown = [line for line in body.splitlines() if line.strip()]
    return runnable, unmarked


def normalized(text: str) -> str:
    """Times replaced by one word and runs of spaces by one space: what tables and times vary in."""
    return " ".join(_TIME.sub("<time>", text).split())


def test_every_shell_block_of_the_docs_says_whether_it_runs_on_the_demo() -> None:
    found = {path.name: blocks(path) for path in DOCS}

    assert not [where for _, unmarked in found.values() for where in unmarked]
    assert all(runnable for runnable, _ in found.values())  # each file shows something to run


@pytest.mark.slow
@pytest.mark.skipif(
    Path(ClientSettings().token_file).exists(), reason="a pod's token is there: the commands would send it"
)
def test_the_docs_commands_run_verbatim_on_the_served_demo(settings: Settings, tmp_path: Path) -> None:
    venv = tmp_path / ".venv" / "bin"  # the README says .venv/bin/mpijob-controller, the docs the bare name
    venv.mkdir(parents=True)
    wrapper = venv / "mpijob-controller"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m controller.cli "$@"\n')
    wrapper.chmod(0o755)
    port = free_port()
    env = cli_env(
        settings,
        tmp_path / ".mpijc",  # the default data directory, where the client commands look for the token
        MPIJC_API__PORT=str(port),
        MPIJC_CLIENT__API_URL=f"http://127.0.0.1:{port}",
        PATH=f"{venv}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    log = tmp_path / "serve.log"
    serving = start_cli(["demo", "--serve"], env, tmp_path, log)
    try:
        deadline = time.monotonic() + STARTUP_S
        while "serving the demo's data" not in log.read_text():
            assert serving.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        token = tmp_path / ".mpijc" / "api-token"
        assert token.stat().st_mode & 0o777 == 0o600
        failures = []
        for block in (b for path in DOCS for b in blocks(path)[0]):
            printed = ""
            for command in block.commands:
                if "| jq" in command and shutil.which("jq") is None:
                    continue  # the docs' one pipe to jq: jq is not part of this project
                done = subprocess.run(
                    ["bash", "-c", command],
                    cwd=tmp_path,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=False,
                )
                printed += done.stdout + done.stderr
                if done.returncode != block.exit:
                    failures.append(
                        f"{block.where}: {command!r} exited {done.returncode}:\n{done.stderr[-800:]}"
                    )
            missing = [line for line in block.shown if normalized(line) not in normalized(printed)]
            if missing:
                failures.append(f"{block.where}: not printed: {missing}")
        assert not failures, "\n".join(failures)
        assert (
            "subscription sub_" not in log.read_text()
        )  # serving keeps the demo's subscriptions as they were
    finally:
        serving.terminate()
        serving.wait(30)
    assert not (tmp_path / ".mpijc" / "api-token").exists()  # the token goes with the API
