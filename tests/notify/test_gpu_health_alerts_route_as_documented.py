"""The GPU health findings as alerts, against Alertmanager's own tool: ``gpu-fault`` is
``TrainingJobGPUFault`` and pages team-a when critical, ``gpu-throttled`` is
``TrainingJobGPUThrottled`` and goes to Slack, and the documented inhibition passes
``amtool check-config``."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.contract.findings import RuleId, Severity
from tests.alert_routes import check_config, labels, routes_to


@pytest.mark.parametrize(
    ("rule", "severity", "alertname", "receiver"),
    [
        ("gpu-fault", "critical", "TrainingJobGPUFault", "team-a-pager"),
        ("gpu-fault", "warning", "TrainingJobGPUFault", "team-a-slack"),  # a program's own Xid
        ("gpu-throttled", "warning", "TrainingJobGPUThrottled", "team-a-slack"),
    ],
)
def test_gpu_health_findings_are_named_and_routed_as_documented(
    amtool: str, documented: Path, rule: RuleId, severity: Severity, alertname: str, receiver: str
) -> None:
    found = labels("team-a", severity, rule)
    assert found["alertname"] == alertname and found["rule"] == rule
    assert "TrainingJobGPUFault" in documented.read_text()  # the inhibition is in the checked block
    routes_to(amtool, documented, found, receiver)
    check_config(amtool, documented)
