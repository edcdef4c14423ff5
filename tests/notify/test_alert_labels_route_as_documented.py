"""The alerts' labels against Alertmanager's own tool: the route of docs/alerting.md passes
``amtool check-config``, and ``amtool config routes test`` sends the labels of real findings
where the document says (a critical OOM of team-a pages, a warning goes to Slack, another
team's to the default); every rule has its own alert name and no label is Prometheus's ``job``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import pytest

from controller.contract.findings import RuleId, Severity
from tests.alert_routes import check_config, labels, routes_to


def test_the_documented_route_passes_amtool_check_config(amtool: str, documented: Path) -> None:
    check_config(amtool, documented)


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
    routes_to(amtool, documented, labels(namespace, severity), receiver)


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
