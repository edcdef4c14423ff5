"""``consume`` running several roles in one process on a configured NATS: with
``MPIJC_NATS__ROLE_PASSWORD_FILES`` each role connects as its own identity with its own password
file, a role the map lacks is refused at start in one line naming the setting, and without the
map every role connects as the process's one identity (``tests/cli/test_up_on_the_embedded_nats_
runs_each_part_as_its_identity.py`` shows the server refusing a shared process's role what only
another role may)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli.runtime import Runtime
from controller.contract.errors import StartupError
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics


def runtime_from(monkeypatch: pytest.MonkeyPatch, **variables: str) -> Runtime:
    """A runtime on settings read from the environment, as a ``consume`` process reads them."""
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    return Runtime(settings, Topology(settings.nats.prefix), PipelineMetrics())


def test_each_role_connects_with_its_own_password_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = {role: tmp_path / role for role in ("history", "rules")}
    rt = runtime_from(
        monkeypatch,
        MPIJC_NATS__URL="nats://nats.example:4222",
        MPIJC_NATS__USER="history",
        MPIJC_NATS__PASSWORD_FILE=str(files["history"]),
        MPIJC_NATS__ROLE_PASSWORD_FILES=json.dumps({role: str(path) for role, path in files.items()}),
    )

    assert rt.nats_for is not None
    rules, history = rt.nats_for("rules"), rt.nats_for("history")
    assert (rules.user, rules.password_file, rules.password, rules.creds_file) == (
        "rules",
        files["rules"],
        None,
        None,
    )
    assert (history.user, history.password_file) == ("history", files["history"])
    assert rules.url == "nats://nats.example:4222"
    with pytest.raises(StartupError, match=r"MPIJC_NATS__ROLE_PASSWORD_FILES: no password file for 'audit'"):
        rt.nats_for("audit")


def test_without_the_map_every_role_is_the_process_identity(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rt = runtime_from(
        monkeypatch,
        MPIJC_NATS__URL="nats://nats.example:4222",
        MPIJC_NATS__USER="consumers",
        MPIJC_NATS__PASSWORD_FILE=str(tmp_path / "consumers"),
    )

    assert rt.nats_for is None
    assert rt.nats_as("rules").user == "consumers"
