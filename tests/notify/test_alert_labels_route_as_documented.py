"""The alerts' labels against Alertmanager's own tool: the route of docs/alerting.md passes
``amtool check-config``, and ``amtool config routes test`` sends the labels of real findings
where the document says (a critical OOM of team-a pages, a warning goes to Slack, another
team's to the default); every rule has its own alert name and no label is Prometheus's ``job``."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args

import pytest

from consumers.notify.alerting import alert_row
from controller.contract.findings import RuleId, Severity
from controller.contract.notifications import JobInfo
from controller.contract.settings import NotifySettings
from controller.testing.notify import finding, job
from controller.testing.packages import debian_binary

ROOT = Path(__file__).resolve().parents[2]
RECEIVERS = "receivers:\n  - name: default\n  - name: team-a-slack\n  - name: team-a-pager\n"


@pytest.fixture(scope="module")
def amtool() -> Iterator[str]:
    found, why = debian_binary("prometheus-alertmanager", ("amtool",))
    if found is None:
        pytest.skip(why)
    yield found


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
    observed = job("Failed", namespace=namespace)
    ref = observed.ref
    info = JobInfo(uid=ref.uid, kind=ref.kind, namespace=ref.namespace, name=ref.name)
    row = alert_row(finding(observed, rule, severity=severity), info, NotifySettings(), datetime.now(UTC))
    return dict(row["labels"])


def test_the_documented_route_passes_amtool_check_config(amtool: str, documented: Path) -> None:
    done = subprocess.run(
        [amtool, "check-config", str(documented)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("namespace", "severity", "receiver"),
    [
        ("team-a", "critical", "team-a-pager"),
        ("team-a", "warning", "team-a-slack"),
        ("team-b", "critical", "default"),
    ],
    ids=["critical-pages", "warning-to-slack", "other-team-default"],
)
def test_findings_route_where_the_document_says(
    amtool: str, documented: Path, namespace: str, severity: Severity, receiver: str
) -> None:
    matchers = [f"{k}={v}" for k, v in labels(namespace, severity).items()]
    done = subprocess.run(
        [
            amtool,
            "config",
            "routes",
            "test",
            f"--config.file={documented}",
            f"--verify.receivers={receiver}",
            *matchers,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_rule_has_its_own_alert_name_and_no_job_label() -> None:
    rules = get_args(RuleId)
    names = {labels("team-a", "critical", rule)["alertname"] for rule in rules}
    assert len(names) == len(rules)
    assert all(re.fullmatch(r"TrainingJob[A-Z][A-Za-z]+", name) for name in names), names
    found = labels("team-a", "critical")
    assert found["alertname"] == "TrainingJobOOM"
    assert "job" not in found
    assert {found["training_job"], found["kind"], found["namespace"], found["rule"], found["severity"]} == {
        "pi",
        "MPIJob",
        "team-a",
        "oom",
        "critical",
    }
