"""Starting ``mpijob-controller`` commands as separate processes against this test's services."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from controller.contract.settings import Settings


def cli_env(settings: Settings, workdir: Path, **overrides: str) -> dict[str, str]:
    """The environment of a CLI process using this test's database, NATS prefix and a private data dir;
    ``overrides`` are further ``MPIJC_…`` variables."""
    assert settings.database.url and settings.nats.url
    return {
        **os.environ,
        "MPIJC_DATABASE__URL": settings.database.url.get_secret_value(),
        "MPIJC_DATABASE__SINGLE_ROLE": str(settings.database.single_role).lower(),
        "MPIJC_NATS__URL": settings.nats.url,
        "MPIJC_NATS__PREFIX": settings.nats.prefix,
        "MPIJC_EMBEDDED__DATA_DIR": str(workdir),
        "MPIJC_METRICS__PORT": "0",  # several processes on one machine: any free port
        "MPIJC_METRICS__UP_PORT": "0",
        **overrides,
    }


def start_cli(args: list[str], env: dict[str, str], workdir: Path, log: Path) -> subprocess.Popen[bytes]:
    """``mpijob-controller ARGS…`` in the background, output appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "controller.cli", *args],
            env=env,
            cwd=workdir,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def run_cli(
    args: Sequence[str], env: dict[str, str], workdir: Path | None = None, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """``mpijob-controller ARGS…`` to its end, its output and errors captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", *args],
        env=env,
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
