"""What a rule is: an id, a severity, a detector over :class:`RunState`, and its words.

A detector is a pure function ``(state, context) -> Detection | None``: it reads the run's
state and the injected ``now`` (never the clock), and says whether its condition holds
*right now*. The engine turns detections into findings, deduplicates them and resolves a
finding when its detector stops returning a detection, so a rule never keeps state.

``Detection.key`` names *what* fired (which pods, which reason, which host), without
counters or durations: a different key is a material change worth publishing, the same
key with a longer duration or a higher restart count is just the same problem still there.

Rules come in two kinds. A ``cause`` explains a failure; once the run has finished it is
the final verdict and stays firing (unless the rule says ``keeps_verdict=False``: the
catch-all ``failed`` holds only while its condition does, so a run retried into success
sheds it). A ``stall`` (hangs, a failure that does not propagate) only means something
while the run is live, and resolves when it finishes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from consumers.rules.state import PodState, RunState
from consumers.rules.thresholds import RuleThresholds
from controller.contract.events import ContainerState, K8sEventObserved
from controller.contract.findings import Evidence, RuleId, Severity, doc_anchor

RuleKind = Literal["cause", "stall"]


@dataclass(frozen=True)
class Context:
    """The injected clock reading and the thresholds of the run's namespace."""

    now: datetime
    thresholds: RuleThresholds

    def age(self, since: datetime) -> float:
        """Seconds from ``since`` to now (negative if ``since`` lies ahead, e.g. clock skew)."""
        return (self.now - since).total_seconds()


@dataclass(frozen=True)
class Detection:
    """A rule's condition holds: the sentence, the facts, and what makes it this problem."""

    root_cause: str
    evidence: tuple[Evidence, ...]
    key: tuple[str, ...]
    severity: Severity | None = None
    remediation: tuple[str, ...] | None = None
    tentative: bool = False
    """Read from lines seen in a running job's output that are not yet a verdict: a warning that
    resolves as soon as it no longer holds, never kept as a finished run's cause."""


Detector = Callable[[RunState, Context], "Detection | None"]


def _no_settle(thresholds: RuleThresholds) -> float:
    return 0.0


@dataclass(frozen=True)
class Rule:
    """One entry of the catalog."""

    id: RuleId
    kind: RuleKind
    severity: Severity
    summary: str
    remediation: tuple[str, ...]
    detect: Detector
    explained_by: frozenset[RuleId] = frozenset()
    settle_s: Callable[[RuleThresholds], float] = _no_settle
    keeps_verdict: bool = True

    @property
    def doc_anchor(self) -> str:
        return doc_anchor(self.id)


# --------------------------------------------------------------------- evidence


def pod_fact(pod: PodState, field: str, value: object) -> Evidence:
    """A field of a pod's status."""
    return Evidence(source=f"pod/{pod.name}", field=field, value=str(value))


def container_fact(pod: PodState, container: ContainerState, field: str, value: object) -> Evidence:
    """A field of one container's status."""
    kind = "initContainers" if container.init else "containers"
    return pod_fact(pod, f"{kind}[{container.name}].{field}", value)


def log_facts(pod: PodState, lines: Iterable[str]) -> tuple[Evidence, ...]:
    """Log lines of a pod, verbatim."""
    return tuple(pod_fact(pod, "log", line) for line in lines)


def event_fact(event: K8sEventObserved) -> Evidence:
    """A Kubernetes Event, attributed to the object it is about."""
    return Evidence(
        source=f"{event.involved.kind.lower()}/{event.involved.name}",
        field=f"event[{event.reason}]",
        value=event.message,
    )


def job_fact(state: RunState, field: str, value: object) -> Evidence:
    """A field of the job object."""
    return Evidence(source=f"{state.ref.kind.lower()}/{state.ref.name}", field=field, value=str(value))
