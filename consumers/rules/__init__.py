"""The rules consumer: turn the events of a run into findings.

The package has two sides. The *judgement* is pure and synchronous — no bus, no database, no
clock: it folds events into a run's state and says what holds at an injected ``now``. The *bus
side* feeds it: the service calls :meth:`RuleEngine.observe` with each bus event and
:meth:`RuleEngine.tick` periodically, both with the current time, and publishes the findings they
return. Importing this package, or any module of the judgement, loads nothing of the bus side
(nor nats-py): its names here (``RulesService``, ``RulesReplica``, ``CONSUMER``…) are loaded
when first used.

Each floor imports only the floors below it; ``pyproject.toml``'s import contract keeps the
order (modules on one floor separated by "|" never import each other). The bus side:

- ``consumer``: ``attach()``, the role;
- ``replica``: the partitions one replica runs, each a durable and a lane of
  :mod:`controller.bus.consuming` with an ownership filter (leases: :mod:`controller.bus.leases`);
- ``service``: one engine, its outbox, ticker and warm start;
- ``snapshot`` | ``logreader`` | ``metrics`` | ``eventclock``: the engine's state kept in a
  key-value bucket; the durable on LOGS that passes live evidence to the job's subject; the
  consumer's series; now, as the events tell it.

The judgement, below it:

- ``engine``: ``evaluate()``, ``RuleEngine``: findings, their changes and revisions;
- ``catalog``: the ordered rules and what explains what;
- the rules, one family each, which may use each other's readings: ``catchall`` (a failure no
  other rule explains), ``containers``, ``disks``, ``forecast``, ``gpu``, ``gpuhealth``,
  ``memory``, ``mpi``, ``nodes``, ``quota``, ``rendezvous``, ``restarts``, ``scheduling``,
  ``segfaults``, ``stalls``, ``stragglers``, ``usage``, ``nodeconditions`` (the bad spells of the
  pods' nodes' conditions, read by ``gpuhealth`` and ``stragglers`` too), ``cotenants`` (the
  other jobs on a worker's node, read by ``stragglers``);
- ``culprits`` | ``errors``: which rank stopped or erred first; exit codes and errors in words;
- ``live``: which lines of a running job's output are evidence;
- ``facts``: shared readings of a run;
- ``rule`` | ``wording``: what a rule is; how findings speak;
- ``rendezvouslines``: the wordings of a missed rendezvous;
- ``families``: who printed a line and what it says about the mesh;
- ``signatures``: the failure signatures read in log tails;
- ``tails`` | ``trend`` | ``progress``: failure-time log tails; robust trends of a usage curve;
  the step counters ranks print (the Xid catalogue is :mod:`controller.contract.xids`);
- ``liveverdicts`` | ``stateformat``: what a line seen live is worth as the run goes on; a run's
  state as the snapshot keeps it;
- ``state`` | ``thresholds``: what is known about a run, folded from its events; what is
  configured.
"""

import importlib
from typing import TYPE_CHECKING, Any

from consumers.rules.catalog import CATALOG, RULES
from consumers.rules.engine import RuleEngine, evaluate
from consumers.rules.rule import Context, Detection, Rule
from consumers.rules.state import RunState
from consumers.rules.thresholds import RuleThresholds, ThresholdOverride

if TYPE_CHECKING:
    from consumers.rules.metrics import RulesMetrics
    from consumers.rules.replica import RulesReplica
    from consumers.rules.service import (
        CONSUMER,
        TICK_INTERVAL_S,
        RulesService,
        WarmStart,
        durable,
        run_ticker,
    )

_BUS_SIDE = {
    "CONSUMER": "consumers.rules.service",
    "TICK_INTERVAL_S": "consumers.rules.service",
    "RulesService": "consumers.rules.service",
    "WarmStart": "consumers.rules.service",
    "durable": "consumers.rules.service",
    "run_ticker": "consumers.rules.service",
    "RulesReplica": "consumers.rules.replica",
    "RulesMetrics": "consumers.rules.metrics",
}
"""Names of the bus side, loaded when first asked for: a pure import (``consumers.rules.signatures``,
the engine) does not load nats-py or prometheus_client."""


def __getattr__(name: str) -> Any:
    """The bus side's names, imported on first use (PEP 562)."""
    module = _BUS_SIDE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


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
