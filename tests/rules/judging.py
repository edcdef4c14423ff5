"""The rule engine judging a story in process: what fires once it has observed every event, and
usage readings of a run's pods for it to judge."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from consumers.rules import RuleEngine, RuleThresholds
from controller.contract.events import BusEvent
from controller.contract.findings import Finding
from controller.testing.events import at, pod_usage, usage


def firing(
    events: Iterable[BusEvent], now: datetime, thresholds: RuleThresholds | None = None
) -> dict[str, Finding]:
    """The findings firing, by rule, after a fresh engine observed ``events`` at ``now``."""
    rules = RuleEngine(thresholds or RuleThresholds())
    found: dict[str, Finding] = {}
    for event in events:
        for finding in rules.observe(event, now):
            found[finding.rule] = finding
    return {rule: f for rule, f in found.items() if f.status == "firing"}


def reading(utils: list[list[float]], memory: dict[int, list[float]] | None = None) -> BusEvent:
    """One usage reading ending at 30 s: pod ``i``'s GPU utilization ``utils[i]`` and its memory
    (GiB) ``memory[i]``, 8 GiB throughout where not given."""
    end = at(30)
    memory = memory or {}
    return usage(
        *(
            pod_usage(i, util=u, memory_gib=memory.get(i, [8.0] * len(u)), end=end)
            for i, u in enumerate(utils)
        ),
        observed_at=end,
    )
