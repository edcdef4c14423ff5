"""Alertmanager's own tool over the route of docs/alerting.md: ``amtool`` (Debian's package), the
documented route block with its receivers declared, the labels a finding's alert carries, and
``amtool check-config`` / ``amtool config routes test`` run on them."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from consumers.notify.alerting import alert_row
from controller.contract.findings import RuleId, Severity
from controller.contract.notifications import JobInfo
from controller.contract.settings import NotifySettings
from controller.testing.notify import finding, job
from controller.testing.packages import debian_binary

ROOT = Path(__file__).resolve().parents[1]
RECEIVERS = "receivers:\n  - name: default\n  - name: team-a-slack\n  - name: team-a-pager\n"


@pytest.fixture(scope="session")
def amtool() -> str:
    found, why = debian_binary("prometheus-alertmanager", ("amtool",))
    if found is None:
        pytest.skip(why)
    return found


@pytest.fixture
def documented(tmp_path: Path) -> Path:
    """The route block of docs/alerting.md, with its receivers declared."""
    text = (ROOT / "docs" / "alerting.md").read_text()
    section = text[text.index("## A route") :]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)[:1]
    path = tmp_path / "alertmanager.yml"
    path.write_text(block + RECEIVERS)
    return path


def labels(namespace: str, severity: Severity, rule: RuleId = "oom") -> dict[str, str]:
    """The labels of the alert made of a ``rule`` finding on a failed MPIJob in ``namespace``."""
    observed = job("Failed", namespace=namespace)
    ref = observed.ref
    info = JobInfo(uid=ref.uid, kind=ref.kind, namespace=ref.namespace, name=ref.name)
    row = alert_row(finding(observed, rule, severity=severity), info, NotifySettings(), datetime.now(UTC))
    return dict(row["labels"])


def _amtool(amtool: str, *args: str) -> None:
    done = subprocess.run([amtool, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def check_config(amtool: str, config: Path) -> None:
    """``amtool check-config`` passes ``config``."""
    _amtool(amtool, "check-config", str(config))


def routes_to(amtool: str, config: Path, found: Mapping[str, str], receiver: str) -> None:
    """``amtool config routes test`` sends an alert labelled ``found`` to ``receiver`` (only)."""
    matchers = [f"{k}={v}" for k, v in found.items()]
    _amtool(
        amtool,
        "config",
        "routes",
        "test",
        f"--config.file={config}",
        f"--verify.receivers={receiver}",
        *matchers,
    )
