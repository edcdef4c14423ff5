"""Rules ``evicted`` and ``node-lost``: a pod was taken away by its node, not by its code.

``evicted``: the kubelet evicted the pod under node pressure (status reason ``Evicted``,
or its ``Evicted`` Event before the status catches up); the message says which resource
ran short. ``node-lost``: the pod's node stopped answering — status reason ``NodeLost``,
phase ``Unknown``, a ``DisruptionTarget`` condition set by the taint manager, or a
``NodeNotReady`` Event while the pod is not ready.

Both clear when the pod is replaced (a newer pod in the same slot) or, for node-lost,
when it is ready again.
"""

from __future__ import annotations

from dataclasses import dataclass

from consumers.rules.rule import Context, Detection, Rule, event_fact, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, first_sentence, lower_first, who
from controller.contract.findings import Evidence

_TAINT_EVICTION = frozenset({"DeletionByTaintManager"})


@dataclass(frozen=True)
class PodLoss:
    """Why one pod was lost, in a few words, and the facts behind it."""

    pod: PodState
    detail: str
    evidence: tuple[Evidence, ...]


def eviction(state: RunState, pod: PodState) -> PodLoss | None:
    """The pod was evicted by its kubelet."""
    if pod.observed.reason == "Evicted":
        message = pod.observed.message or ""
        facts = (pod_fact(pod, "status.reason", "Evicted"), pod_fact(pod, "status.message", message))
        return PodLoss(pod, lower_first(first_sentence(message)), facts if message else facts[:1])
    if pod.ready:
        return None
    events = [e for e in state.events_about(pod) if e.reason == "Evicted"]
    if not events:
        return None
    return PodLoss(pod, lower_first(first_sentence(events[-1].message)), (event_fact(events[-1]),))


def node_loss(state: RunState, pod: PodState) -> PodLoss | None:
    """The pod's node went away or stopped reporting."""
    if pod.observed.reason == "NodeLost":
        return PodLoss(pod, "node is unresponsive", (pod_fact(pod, "status.reason", "NodeLost"),))
    if pod.phase == "Unknown" and not pod.deleted:
        return PodLoss(pod, "pod status unknown", (pod_fact(pod, "status.phase", "Unknown"),))
    disruption = pod.condition("DisruptionTarget")
    if disruption is not None and disruption.status == "True" and disruption.reason in _TAINT_EVICTION:
        fact = pod_fact(pod, "conditions[DisruptionTarget].reason", disruption.reason)
        return PodLoss(pod, "node not ready or unreachable", (fact,))
    if pod.ready:
        return None
    events = [e for e in state.events_about(pod) if e.reason == "NodeNotReady"]
    return PodLoss(pod, "node not ready", (event_fact(events[-1]),)) if events else None


def _sentence(loss: PodLoss, verb: str, others: list[PodState]) -> str:
    detail = f": {loss.detail}" if loss.detail else ""
    return f"{who(loss.pod)} {verb}{detail}{also(others)}"


def _detect_evicted(state: RunState, ctx: Context) -> Detection | None:
    losses = [loss for pod in state.current_pods() if (loss := eviction(state, pod)) is not None]
    if not losses:
        return None
    return Detection(
        root_cause=_sentence(losses[0], "was evicted", [loss.pod for loss in losses[1:]]),
        evidence=tuple(e for loss in losses for e in loss.evidence),
        key=tuple(loss.pod.uid for loss in losses),
    )


def _detect_node_lost(state: RunState, ctx: Context) -> Detection | None:
    losses = [
        loss
        for pod in state.current_pods()
        if eviction(state, pod) is None and (loss := node_loss(state, pod)) is not None
    ]
    if not losses:
        return None
    first = losses[0]
    verb = f"lost its node {first.pod.node}" if first.pod.node else "lost its node"
    evidence = [e for loss in losses for e in loss.evidence]
    evidence.extend(pod_fact(loss.pod, "spec.nodeName", loss.pod.node) for loss in losses if loss.pod.node)
    return Detection(
        root_cause=_sentence(first, verb, [loss.pod for loss in losses[1:]]),
        evidence=tuple(evidence),
        key=tuple(f"{loss.pod.uid}@{loss.pod.node}" for loss in losses),
    )


EVICTED = Rule(
    id="evicted",
    kind="cause",
    severity="warning",
    summary="The kubelet evicted a pod because its node ran short of memory, disk or PIDs.",
    remediation=(
        "Set requests equal to limits for memory (Guaranteed QoS): those pods are evicted last.",
        "Write scratch data to a volume with a size limit, not the container's writable layer.",
        "See which resource ran short: kubectl describe node <node> (Conditions, Allocated resources).",
    ),
    detect=_detect_evicted,
)

NODE_LOST = Rule(
    id="node-lost",
    kind="cause",
    severity="critical",
    summary="A pod's node stopped responding (NotReady, unreachable, or gone).",
    remediation=(
        "Check the node: kubectl get node <node>; kubectl describe node <node> (Conditions, Events).",
        "A NotReady GPU node often points at the GPU driver, the kubelet or the network; "
        "ask the cluster admins, then cordon it: kubectl cordon <node>.",
        "Resubmit the job; with checkpoints, resume from the latest one.",
    ),
    detect=_detect_node_lost,
)
