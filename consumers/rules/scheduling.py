"""Rule ``unschedulable``: the scheduler found no node for a pod of the run.

The verdict comes from the pod's ``PodScheduled=False`` condition with reason
``Unschedulable``, or, before the status catches up, from a ``FailedScheduling`` Event
about a pod that is still unbound. Its message counts nodes, not GPUs (``0/12 nodes are
available: 4 Insufficient nvidia.com/gpu, …``), so for GPU shortages the sentence is
rebuilt from what is known: the GPUs the run asks for (workers x GPUs per worker, from the
job spec) and the GPUs of the workers that *did* get a node, which is what the cluster
could give this run. With no worker placed, it says that no node had a worker's share free.

A rejection is not yet a verdict where a cluster autoscaler runs: the scheduler rejects
every pod that waits for a node being added, and the autoscaler answers on the pod within a
scan (10 s by default) — ``TriggeredScaleUp``, or ``NotTriggerScaleUp`` with its reasons.
So a pod counts as unschedulable once the autoscaler says no node group can take it
("max node group size reached", nothing matches), or once its rejection is
:data:`AUTOSCALER_GRACE_S` old with no answer (no autoscaler). While the autoscaler adds a
node for it, or backs off after a failed scale-up of a group that fits, the pod waits for
capacity rather than being unplaceable: ``hang-pending`` reports that wait if it lasts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from consumers.rules.facts import gpus_per_worker, pod_gpus, requested_gpus
from consumers.rules.rule import Context, Detection, Rule, event_fact, job_fact, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, who
from controller.contract.events import K8sEventObserved
from controller.contract.findings import Evidence

AUTOSCALER_GRACE_S = 30.0
"""Seconds a rejected pod waits for the cluster autoscaler's answer before it counts as
unschedulable: three scans at its default 10 s interval."""

ScaleUp = Literal["adding", "backoff", "refused"]
_AUTOSCALER_REASONS = frozenset({"TriggeredScaleUp", "NotTriggerScaleUp"})
_BACKOFF = re.compile(r"in backoff after failed scale-up", re.IGNORECASE)

_INSUFFICIENT_GPU = re.compile(r"Insufficient (?P<resource>[\w./-]*gpu[\w./-]*)", re.IGNORECASE)
_NODE_REASONS = re.compile(r"nodes are available: (?P<reasons>.*?)(?:\. preemption:|\.?$)", re.DOTALL)


@dataclass(frozen=True)
class SchedulingFailure:
    """One unbound pod and the scheduler's last word on it."""

    pod: PodState
    message: str
    evidence: Evidence
    since: datetime


@dataclass(frozen=True)
class AutoscalerAnswer:
    """The cluster autoscaler's latest word on an unplaced pod."""

    verdict: ScaleUp
    event: K8sEventObserved


def scheduling_failure(state: RunState, pod: PodState) -> SchedulingFailure | None:
    """Why ``pod`` has no node, if the scheduler said so, and since when."""
    if pod.deleted or pod.scheduled or pod.phase != "Pending":
        return None
    events = [e for e in state.events_about(pod) if e.reason == "FailedScheduling"]
    first_event = min((e.first_timestamp or e.observed_at for e in events), default=None)
    condition = pod.condition("PodScheduled")
    if condition is not None and condition.status == "False" and condition.reason == "Unschedulable":
        message = condition.message or ""
        since = min(t for t in (condition.last_transition_time, first_event, pod.changed_at) if t is not None)
        return SchedulingFailure(
            pod, message, pod_fact(pod, "conditions[PodScheduled].message", message), since
        )
    if events and first_event is not None:
        return SchedulingFailure(pod, events[-1].message, event_fact(events[-1]), first_event)
    return None


def autoscaler_answer(state: RunState, pod: PodState) -> AutoscalerAnswer | None:
    """What the cluster autoscaler last said about ``pod``: adding a node, backing off, or no."""
    events = [e for e in state.events_about(pod) if e.reason in _AUTOSCALER_REASONS]
    if not events:
        return None
    last = events[-1]
    if last.reason == "TriggeredScaleUp":
        return AutoscalerAnswer("adding", last)
    return AutoscalerAnswer("backoff" if _BACKOFF.search(last.message) else "refused", last)


def _unplaceable(state: RunState, failure: SchedulingFailure, ctx: Context) -> bool:
    """The rejection is a verdict: no autoscaler will add a node for this pod."""
    answer = autoscaler_answer(state, failure.pod)
    if answer is not None:
        return answer.verdict == "refused"
    return ctx.age(failure.since) >= AUTOSCALER_GRACE_S


def placed_gpus(state: RunState) -> int:
    """GPUs held by the run's workers that are bound to a node."""
    return sum(pod_gpus(state, w) for w in state.workers() if w.scheduled and not w.deleted)


def _detect_unschedulable(state: RunState, ctx: Context) -> Detection | None:
    failures = [
        f
        for pod in state.current_pods()
        if (f := scheduling_failure(state, pod)) is not None and _unplaceable(state, f, ctx)
    ]
    if not failures:
        return None
    first = failures[0]
    evidence: list[Evidence] = [f.evidence for f in failures]
    evidence.extend(
        event_fact(answer.event) for f in failures if (answer := autoscaler_answer(state, f.pod)) is not None
    )
    gpu = next((m for f in failures if (m := _INSUFFICIENT_GPU.search(f.message))), None)
    if gpu is not None and (requested := requested_gpus(state)):
        sentence = _gpu_sentence(state, requested)
        evidence.append(job_fact(state, "spec.workers", state.expected_workers()))
        resource = gpu.group("resource").rstrip(".")  # "Insufficient nvidia.com/gpu. preemption: …"
        evidence.append(job_fact(state, f"spec.worker.resources.limits[{resource}]", gpus_per_worker(state)))
        key: tuple[str, ...] = ("gpu", str(requested), str(placed_gpus(state)))
    else:
        match = _NODE_REASONS.search(first.message)
        reasons = match.group("reasons").strip() if match else first.message.strip().rstrip(".")
        sentence = f"{who(first.pod)} cannot be scheduled: {reasons}{also([f.pod for f in failures[1:]])}"
        key = ("other", *(f.pod.uid for f in failures))
    return Detection(root_cause=sentence, evidence=tuple(evidence), key=key)


def _gpu_sentence(state: RunState, requested: int) -> str:
    placed = placed_gpus(state)
    if placed:
        return f"Insufficient GPUs: requested {requested}, available {placed}"
    return (
        f"Insufficient GPUs: requested {requested}, no node has {gpus_per_worker(state)} free for one worker"
    )


UNSCHEDULABLE = Rule(
    id="unschedulable",
    kind="cause",
    severity="warning",
    summary="The scheduler cannot place a pod: not enough GPUs, CPU or memory, or no matching node.",
    remediation=(
        "See what the scheduler says: kubectl -n {namespace} get events "
        "--field-selector reason=FailedScheduling",
        "For GPUs: compare the request (workers x GPUs per worker) with free GPUs: "
        "kubectl describe nodes | grep -A8 'Allocated resources'. Use fewer or smaller workers, "
        "or wait for capacity (a queue such as Kueue admits the job only when it fits).",
        "For selectors, affinity or taints: check nodeSelector, affinity and tolerations of the "
        "pod template against the labels and taints of the GPU nodes.",
    ),
    detect=_detect_unschedulable,
)
