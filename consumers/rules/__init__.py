"""The rules consumer's logic: turn the events of a run into findings.

Pure and synchronous — no bus, no database, no clock: the consumer feeds
:meth:`RuleEngine.observe` with each bus event and calls :meth:`RuleEngine.tick`
periodically, both with the current time, and publishes the findings they return.

Layers, each importing only the ones above it::

    thresholds, state          what is configured, what is known about a run
    rule, wording, facts, logs what a rule is; how findings speak; shared readings
    memory, containers, nodes, scheduling, mpi, stalls   the rules, one family each
    catalog                    the ordered rules and what explains what
    engine                     evaluate(), RuleEngine
"""

from consumers.rules.catalog import CATALOG, RULES
from consumers.rules.engine import RuleEngine, evaluate
from consumers.rules.rule import Context, Detection, Rule
from consumers.rules.state import RunState
from consumers.rules.thresholds import RuleThresholds, ThresholdOverride

__all__ = [
    "CATALOG",
    "RULES",
    "Context",
    "Detection",
    "Rule",
    "RuleEngine",
    "RuleThresholds",
    "RunState",
    "ThresholdOverride",
    "evaluate",
]
