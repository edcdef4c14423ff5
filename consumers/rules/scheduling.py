"""Rule ``unschedulable``: the scheduler found no node for a pod of the run.

The verdict comes from the pod's ``PodScheduled=False`` condition with reason
``Unschedulable``, or, before the status catches up, from a ``FailedScheduling`` Event
about a pod that is still unbound. Its message counts nodes, not GPUs (``0/12 nodes are
available: 4 Insufficient nvidia.com/gpu, …``), so for GPU shortages the sentence is
rebuilt from what is known: the GPUs the run asks for (workers x GPUs per worker, from the
job spec) and the GPUs of the workers that *did* get a node, which is what the cluster
could give this run. With no worker placed, it says that no node had a worker's share free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from consumers.rules.facts import gpus_per_worker, pod_gpus, requested_gpus
from consumers.rules.rule import Context, Detection, Rule, event_fact, job_fact, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, who
from controller.findings import Evidence

_INSUFFICIENT_GPU = re.compile(r"Insufficient (?P<resource>[\w./-]*gpu[\w./-]*)", re.IGNORECASE)
_NODE_REASONS = re.compile(r"nodes are available: (?P<reasons>.*?)(?:\. preemption:|\.?$)", re.DOTALL)


@dataclass(frozen=True)
class SchedulingFailure:
    """One unbound pod and the scheduler's last word on it."""

    pod: PodState
    message: str
    evidence: Evidence


def scheduling_failure(state: RunState, pod: PodState) -> SchedulingFailure | None:
    """Why ``pod`` has no node, if the scheduler said so."""
    if pod.deleted or pod.scheduled or pod.phase != "Pending":
        return None
    condition = pod.condition("PodScheduled")
    if condition is not None and condition.status == "False" and condition.reason == "Unschedulable":
        message = condition.message or ""
        return SchedulingFailure(pod, message, pod_fact(pod, "conditions[PodScheduled].message", message))
    events = [e for e in state.events_about(pod) if e.reason == "FailedScheduling"]
    if events:
        return SchedulingFailure(pod, events[-1].message, event_fact(events[-1]))
    return None


def placed_gpus(state: RunState) -> int:
    """GPUs held by the run's workers that are bound to a node."""
    return sum(pod_gpus(state, w) for w in state.workers() if w.scheduled and not w.deleted)


def _detect_unschedulable(state: RunState, ctx: Context) -> Detection | None:
    failures = [f for pod in state.current_pods() if (f := scheduling_failure(state, pod)) is not None]
    if not failures:
        return None
    first = failures[0]
    evidence: list[Evidence] = [f.evidence for f in failures]
    gpu = next((m for f in failures if (m := _INSUFFICIENT_GPU.search(f.message))), None)
    if gpu is not None and (requested := requested_gpus(state)):
        sentence = _gpu_sentence(state, requested)
        evidence.append(job_fact(state, "spec.workers", state.expected_workers()))
        resource = gpu.group("resource")
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
