"""The catalog covers every rule id once, explains without cycles, and documents every rule."""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from typing import get_args

import pytest
from pydantic import ValidationError

import consumers.rules
from consumers.rules import CATALOG, RULES, RuleEngine
from controller.contract.findings import Finding, RuleId, message_id, parse_finding
from controller.testing.events import at, replay, running_run, terminated, worker

TROUBLESHOOTING = Path(__file__).parents[2] / "docs" / "troubleshooting.md"


def test_every_rule_id_is_in_the_catalog_once() -> None:
    assert sorted(rule.id for rule in CATALOG) == sorted(get_args(RuleId))


def test_explanations_form_no_cycle() -> None:
    def reaches(start: RuleId, target: RuleId, seen: frozenset[RuleId] = frozenset()) -> bool:
        return any(
            nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt}))
            for nxt in RULES[start].explained_by
        )

    assert [rule.id for rule in CATALOG if reaches(rule.id, rule.id)] == []


@pytest.mark.parametrize("rule", CATALOG, ids=[r.id for r in CATALOG])
def test_rule_is_documented_under_its_anchor(rule: consumers.rules.Rule) -> None:
    text = TROUBLESHOOTING.read_text()
    section = re.search(rf'<a id="{re.escape(rule.id)}"></a>\n(.*?)(?=\n<a id=|\Z)', text, re.DOTALL)

    assert rule.doc_anchor == f"docs/troubleshooting.md#{rule.id}"
    assert section is not None, f"no section for {rule.id}"
    assert "kubectl" in section.group(1)


def test_package_exports_its_public_api() -> None:
    """``__all__`` is what the package imports of the judgement and what it loads of the bus side."""
    judgement = {
        name
        for name, value in vars(consumers.rules).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name not in typing.__all__
    }
    assert set(consumers.rules.__all__) == judgement | set(consumers.rules._BUS_SIDE)
    assert all(getattr(consumers.rules, name) is not None for name in consumers.rules.__all__)


def _oom_finding() -> Finding:
    run = running_run()
    oom = worker(
        2, phase="Failed", ready=False, containers=(terminated("OOMKilled", 137),), observed_at=at(1)
    )
    (finding,) = replay(RuleEngine(), [*run, oom])
    return finding


def test_finding_round_trips_through_the_bus_format() -> None:
    finding = _oom_finding()

    assert parse_finding(finding.model_dump_json()) == finding


def test_finding_rejects_undeclared_fields() -> None:
    payload = _oom_finding().model_dump(mode="json") | {"color": "red"}

    with pytest.raises(ValidationError, match="color"):
        Finding.model_validate(payload)


def test_each_change_of_a_finding_has_its_own_message_id() -> None:
    finding = _oom_finding()
    resolved = finding.model_copy(update={"status": "resolved", "revision": 2})

    assert message_id(finding) != message_id(resolved)
    assert message_id(finding) == message_id(finding.model_copy())
