"""Rule ``node-degraded``, and the spells of bad node conditions ``gpu-fault`` reads too.

The watcher tells each run the changes of the conditions of the nodes its pods run on
(:mod:`watchers.nodes`: an Event about the Node from source ``node-condition``, the condition in
it). A *spell* is one condition bad from its ``lastTransitionTime`` until the change that
cleared it (or still bad). A spell speaks of a pod when all of these hold:

- the pod runs on that node (a node no pod of the run uses never reaches the run, and a pod
  moved elsewhere is no longer concerned);
- it began during the pod's life: a condition already bad before the pod was created is the
  node's standing state, not what befell the job (as an old counter value is for ``gpu-fault``);
- it lasted ``node_condition_s`` (60 s), or the job failed while it held: a condition that flips
  for seconds and clears says nothing.

A GPU condition (its type or reason names a GPU, an Xid, NVLink or NVSwitch: NVSentinel's
``SysLogsXIDError``, ``SysLogsGPUFallenOff``, AKS's ``GPUMissing``, a provider's
``NebiusGPUError``) is the GPU's fault and ``gpu-fault`` tells it (a CUDA or NCCL error of the
pod is then its evidence, not the cause). Every other bad condition (``Ready`` not ``True``,
``MemoryPressure``, ``DiskPressure``, ``PIDPressure``, node-problem-detector's
``KernelDeadlock``, ``ReadonlyFilesystem``, …) is ``node-degraded``'s: the finding names the
worker, the node and the condition, when it began, and whether that was before the job failed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from consumers.rules.rule import Context, Detection, Rule, event_fact, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, clock_time, duration, who
from controller.contract.events import NODE_CONDITION_SOURCE, K8sEventObserved

__all__ = ["NODE_DEGRADED", "Spell", "failed_at", "gpu_condition", "spells_of", "spells_on", "timing"]

_GPU = re.compile(r"gpu|xid|nvlink|nvswitch|nvidia|dcgm", re.IGNORECASE)


def gpu_condition(kind: str, reason: str) -> bool:
    """Whether a node condition speaks of the node's GPUs."""
    return bool(_GPU.search(kind) or _GPU.search(reason))


@dataclass(frozen=True)
class Spell:
    """One node condition bad from ``start`` until ``end`` (``None``: still bad)."""

    node: str
    kind: str
    status: str
    reason: str
    message: str
    start: datetime
    end: datetime | None
    event: K8sEventObserved

    @property
    def gpu(self) -> bool:
        return gpu_condition(self.kind, self.reason)

    def lasted(self, now: datetime) -> float:
        return ((self.end or now) - self.start).total_seconds()

    def holds_at(self, at: datetime) -> bool:
        return self.start <= at and (self.end is None or at <= self.end)

    @property
    def words(self) -> str:
        reason = f" ({self.reason})" if self.reason else ""
        return f"{self.kind}={self.status}{reason}"


def _spells(events: list[K8sEventObserved]) -> list[Spell]:
    """The bad spells told by a node's condition events, earliest first."""
    changes = sorted(
        (
            (e.condition.last_transition_time or e.observed_at, e)
            for e in events
            if e.source == NODE_CONDITION_SOURCE and e.condition is not None
        ),
        key=lambda item: item[0],
    )
    open_: dict[str, tuple[datetime, K8sEventObserved]] = {}
    found: list[Spell] = []

    def close(kind: str, end: datetime | None) -> None:
        start, event = open_.pop(kind)
        c = event.condition
        assert c is not None
        found.append(
            Spell(event.involved.name, kind, c.status, c.reason or "", c.message or "", start, end, event)
        )

    for at, event in changes:
        kind = event.condition.type if event.condition is not None else ""
        if kind in open_:
            close(kind, at)
        if event.event_type == "Warning":
            open_[kind] = (at, event)
    for kind in list(open_):
        close(kind, None)
    return sorted(found, key=lambda s: s.start)


def spells_on(state: RunState, node: str | None) -> list[Spell]:
    """Every bad spell of ``node``'s conditions the run was told of, earliest first."""
    return _spells(state.events_about_node(node))


def failed_at(state: RunState) -> datetime | None:
    """When the run failed: its first container that ended non-zero, else the job's failure."""
    ends = [
        c.finished_at
        for pod in state.current_pods()
        for c in pod.containers
        if c.state == "terminated" and c.exit_code not in (None, 0) and c.finished_at is not None
    ]
    if ends:
        return min(ends)
    return state.finished_since if state.phase == "Failed" else None


def timing(state: RunState, at: datetime) -> str:
    """Whether ``at`` came before the job's failure, in words."""
    failed = failed_at(state)
    if failed is None:
        return "the job has not failed" if not state.finished else "the job did not fail"
    gap = (failed - at).total_seconds()
    if gap >= 0:
        return f"{duration(gap)} before the job failed at {clock_time(failed)}"
    return f"after the job failed at {clock_time(failed)}"


def spells_of(state: RunState, ctx: Context) -> list[tuple[PodState, Spell]]:
    """The spells that speak of a current pod of the run (see the module docstring), earliest first."""
    failed = failed_at(state)
    found: list[tuple[PodState, Spell]] = []
    for pod in state.current_pods():
        if not pod.node:
            continue
        for spell in spells_on(state, pod.node):
            if spell.start < pod.observed.created_at:
                continue  # the node's standing state before the pod: not what befell the job
            during_failure = failed is not None and spell.holds_at(failed)
            if spell.lasted(ctx.now) >= ctx.thresholds.node_condition_s or during_failure:
                found.append((pod, spell))
    return sorted(found, key=lambda item: item[1].start)


def _detect_node_degraded(state: RunState, ctx: Context) -> Detection | None:
    found = [(pod, spell) for pod, spell in spells_of(state, ctx) if not spell.gpu]
    if not found:
        return None
    pod, spell = found[0]
    lasted = f"for {duration(spell.lasted(ctx.now))}" + ("" if spell.end is not None else " and holds")
    message = f": {spell.message[:200]}" if spell.message else ""
    others = list(dict.fromkeys(p for p, _ in found[1:] if p is not pod))
    evidence = [pod_fact(pod, "spec.nodeName", spell.node)]
    evidence.extend(event_fact(s.event) for _, s in found[:6])
    return Detection(
        root_cause=f"{who(pod)}'s node {spell.node} reported {spell.words} at {clock_time(spell.start)} "
        f"{lasted}, {timing(state, spell.start)}{message}{also(others)}",
        evidence=tuple(evidence),
        key=tuple(dict.fromkeys(f"{p.uid}@{s.node}/{s.kind}/{s.start.isoformat()}" for p, s in found)),
        remediation=(
            f"Take the node out of service: kubectl cordon {spell.node}; kubectl describe node "
            f"{spell.node} shows its conditions and events.",
            "Ask the cluster admins to repair the node (a kernel deadlock or a read-only filesystem "
            "needs a reboot; pressure needs the other pods' requests checked).",
            "Resubmit the job from its last checkpoint; with the node cordoned it lands elsewhere.",
        ),
    )


NODE_DEGRADED = Rule(
    id="node-degraded",
    kind="cause",
    severity="critical",
    summary="A node a pod of the run runs on reported a bad condition during the run (not Ready, "
    "memory, disk or PID pressure, a kernel deadlock, a read-only filesystem, …) for a minute or "
    "while the job failed.",
    remediation=(
        "Cordon the node (kubectl cordon <node>) and have it repaired; kubectl describe node <node> "
        "shows the condition.",
        "Resubmit the job from its last checkpoint.",
    ),
    detect=_detect_node_degraded,
)
