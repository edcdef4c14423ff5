"""The rules consumer: turn the events of a run into findings.

Everything but the bus side (snapshot, service, replica, consumer) is pure and synchronous —
no bus, no database, no clock: the service feeds :meth:`RuleEngine.observe` with each bus event
and calls :meth:`RuleEngine.tick` periodically, both with the current time, and publishes the
findings they return.

Layers, each importing only the ones above it::

    thresholds, state          what is configured, what is known about a run
    rule, wording, facts, logs, signatures, families
                               what a rule is; how findings speak; shared readings
    memory, gpu, segfaults, disks, quota, containers, nodes, scheduling, mpi, stalls
                               the rules, one family each
    catchall                   the rule for a failure no other rule explains
    catalog                    the ordered rules and what explains what
    engine                     evaluate(), RuleEngine
    snapshot                   the bus side (not pure): state kept in a key-value bucket
    metrics, eventclock        the consumer's series; now, as the events tell it
    service                    one engine, its outbox, ticker and warm start
    replica                    the partitions one replica runs (leases: :mod:`controller.bus.leases`)
    consumer                   attach(): the role
"""

from consumers.rules.catalog import CATALOG, RULES
from consumers.rules.engine import RuleEngine, evaluate
from consumers.rules.metrics import RulesMetrics
from consumers.rules.replica import RulesReplica
from consumers.rules.rule import Context, Detection, Rule
from consumers.rules.service import CONSUMER, TICK_INTERVAL_S, RulesService, WarmStart, durable, run_ticker
from consumers.rules.state import RunState
from consumers.rules.thresholds import RuleThresholds, ThresholdOverride

__all__ = [
    "CATALOG",
    "CONSUMER",
    "RULES",
    "TICK_INTERVAL_S",
    "Context",
    "Detection",
    "Rule",
    "RuleEngine",
    "RuleThresholds",
    "RulesMetrics",
    "RulesReplica",
    "RulesService",
    "RunState",
    "ThresholdOverride",
    "WarmStart",
    "durable",
    "evaluate",
    "run_ticker",
]
