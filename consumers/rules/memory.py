"""Rules ``oom`` and ``gpu-oom``: a container ran out of memory, in RAM or on the GPU.

``oom`` trusts the kubelet's ``OOMKilled`` reason. Exit code 137 alone only says SIGKILL
(a deliberate ``kill -9``, a failed liveness probe, a preemption), so it counts as an OOM
kill only when the container had a memory limit *and* something else says memory ran out:
an OOM Kubernetes Event about the pod or an OOM message on the container.

``gpu-oom`` reads the failed container's log tail. In an MPIJob the ranks' output reaches
the launcher through mpirun, so a CUDA OOM usually shows in the launcher's log, tagged
with the rank; the rank is mapped to its worker by ``slotsPerWorker`` (ranks fill each
worker's slots in order, as mpi-operator's hostfile asks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from consumers.rules.facts import Termination, memory_limit, terminations
from consumers.rules.logs import GpuOom, gpu_oom_lines
from consumers.rules.rule import Context, Detection, Rule, container_fact, event_fact, log_facts, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, who
from controller.contract.findings import Evidence

OOM_EVENT_REASONS = frozenset({"OOMKilling", "OOMKilled", "SystemOOM"})
_OOM_TEXT = re.compile(r"out of memory|oom[-_ ]?kill|\bOOM\b", re.IGNORECASE)
_SIGKILL_EXIT = 137


@dataclass(frozen=True)
class OomKill:
    """One container of one pod killed for memory, and why we believe it."""

    pod: PodState
    termination: Termination
    evidence: tuple[Evidence, ...]


def oom_kill(state: RunState, pod: PodState, ctx: Context) -> OomKill | None:
    """The memory kill that still describes ``pod``, if any."""
    for t in terminations(pod, ctx):
        exit_fact = container_fact(pod, t.container, f"{t.field}.exitCode", t.exit_code)
        if t.reason == "OOMKilled":
            reason_fact = container_fact(pod, t.container, f"{t.field}.reason", t.reason)
            return OomKill(pod, t, (reason_fact, exit_fact) if t.exit_code is not None else (reason_fact,))
        if t.exit_code == _SIGKILL_EXIT and memory_limit(state, pod) is not None:
            signs = _oom_signs(state, pod, t)
            if signs:
                return OomKill(pod, t, (exit_fact, *signs))
    return None


def _oom_signs(state: RunState, pod: PodState, t: Termination) -> tuple[Evidence, ...]:
    """What besides SIGKILL says memory ran out."""
    signs = [
        event_fact(e)
        for e in state.events_about(pod)
        if e.reason in OOM_EVENT_REASONS or _OOM_TEXT.search(e.message)
    ]
    message = t.container.message if t.field == "state.terminated" else None
    if message and _OOM_TEXT.search(message):
        signs.append(container_fact(pod, t.container, f"{t.field}.message", message))
    return tuple(signs)


def _detect_oom(state: RunState, ctx: Context) -> Detection | None:
    kills = [k for pod in state.current_pods() if (k := oom_kill(state, pod, ctx)) is not None]
    if not kills:
        return None
    first = kills[0]
    limit = memory_limit(state, first.pod)
    detail = f" (limit {limit})" if limit else ""
    evidence: list[Evidence] = []
    for kill in kills:
        evidence.extend(kill.evidence)
        pod_limit = memory_limit(state, kill.pod)
        if pod_limit:
            evidence.append(pod_fact(kill.pod, "resources.limits.memory", pod_limit))
    return Detection(
        root_cause=f"{who(first.pod)} failed: out of memory{detail}{also([k.pod for k in kills[1:]])}",
        evidence=tuple(evidence),
        key=tuple(f"{k.pod.uid}/{k.termination.container.name}" for k in kills),
    )


def gpu_oom_subject(state: RunState, pod: PodState, hit: GpuOom) -> str:
    """Who ran out of GPU memory: the worker pod, or the rank named in the launcher log."""
    if pod.role != "launcher":
        return who(pod)
    if hit.rank is None:
        return "A rank"
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    return f"Rank {hit.rank} on worker-{hit.rank // slots}" if slots else f"Rank {hit.rank}"


def _detect_gpu_oom(state: RunState, ctx: Context) -> Detection | None:
    found = [(pod, hits) for pod in state.current_pods() if (hits := gpu_oom_lines(pod.log_tail))]
    if not found:
        return None
    found.sort(key=lambda item: item[0].role == "launcher")  # a worker's own log is the most direct
    pod, hits = found[0]
    subject = gpu_oom_subject(state, pod, hits[0])
    others = [p for p, _ in found[1:] if p.role != "launcher"]
    evidence = tuple(e for p, h in found for e in log_facts(p, [hit.line for hit in h]))
    return Detection(
        root_cause=f"{subject} failed: CUDA out of memory{also(others)}",
        evidence=evidence,
        key=(subject, *(p.uid for p, _ in found)),
    )


OOM = Rule(
    id="oom",
    kind="cause",
    severity="critical",
    summary="A container was killed for exceeding its memory limit.",
    remediation=(
        "Raise the memory limit of the role that failed (resources.limits.memory in its pod "
        "template), or lower per-rank memory use: batch size, data-loader workers, prefetching.",
        "All ranks on one worker share its limit: with slotsPerWorker > 1 size it for every rank.",
        "Measure peak usage while it runs: kubectl -n {namespace} top pod -l "
        "training.kubeflow.org/job-name={job}",
    ),
    detect=_detect_oom,
)

GPU_OOM = Rule(
    id="gpu-oom",
    kind="cause",
    severity="critical",
    summary="A rank ran out of GPU memory (CUDA out of memory).",
    remediation=(
        "Lower the per-GPU batch size, or use gradient accumulation to keep the global batch.",
        "Enable activation checkpointing, mixed precision (bf16/fp16) or sharded optimizer states.",
        "Check that each rank uses its own GPU (CUDA_VISIBLE_DEVICES / local rank), not GPU 0.",
    ),
    detect=_detect_gpu_oom,
)
