"""Facts read off pods and job specs that several rules share.

- :func:`terminations`: how each container last ended, if that still describes the pod.
  The kubelet may restart a container before any watcher sees it terminated, so the
  failure then only shows as ``lastState`` of a running container; it counts while the
  restart is recent (``settle_s``), so a restart-and-recover is neither missed nor kept.
- GPU and memory figures from pod resources, falling back to the job's role spec.
- :func:`pod_text`: what a pod said when it failed — the lines seen live that were judged
  fatal, its log tail, then the termination messages of its containers
  (``terminationMessagePolicy: FallbackToLogsOnError`` puts the end of the log there) — for the
  log-reading rules; nothing of a pod that exited cleanly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from consumers.rules.rule import Context
from consumers.rules.state import PodState, RunState
from controller.contract.events import ContainerState, Resources, RoleSpec


@dataclass(frozen=True)
class ContainerEnd:
    """How one container ended: now (``state``) or before its latest restart (``lastState``)."""

    container: ContainerState
    reason: str | None
    exit_code: int | None
    finished_at: datetime | None
    field: str


H = TypeVar("H")
"""What a finder finds in a pod's text."""


def terminations(pod: PodState, ctx: Context) -> list[ContainerEnd]:
    """The terminations that still describe ``pod`` now, one per container at most."""
    found: list[ContainerEnd] = []
    for c in pod.containers:
        if c.state == "terminated":
            found.append(ContainerEnd(c, c.reason, c.exit_code, c.finished_at, "state.terminated"))
        elif c.last_reason is not None or c.last_exit_code is not None:
            last = ContainerEnd(
                c, c.last_reason, c.last_exit_code, c.last_finished_at, "lastState.terminated"
            )
            if c.state != "running" or _recent(last, pod, ctx):
                found.append(last)
    return found


def _recent(last: ContainerEnd, pod: PodState, ctx: Context) -> bool:
    since = last.finished_at or last.container.started_at or pod.changed_at
    return pod.deleted or ctx.age(since) < ctx.thresholds.settle_s


def role_spec(state: RunState, pod: PodState) -> RoleSpec | None:
    """The job spec of the pod's role."""
    if state.job is None:
        return None
    return state.job.spec.launcher if pod.role == "launcher" else state.job.spec.worker


def gpu_count(resources: Resources) -> int:
    """GPUs in a resource list (``nvidia.com/gpu``, ``amd.com/gpu``, …); limits win."""
    total = 0
    for key in {*resources.limits, *resources.requests}:
        if "gpu" not in key.lower():
            continue
        value = resources.limits.get(key) or resources.requests.get(key) or "0"
        total += int(value) if value.isdigit() else 0
    return total


def pod_gpus(state: RunState, pod: PodState) -> int:
    """GPUs one pod asks for."""
    own = gpu_count(pod.observed.resources)
    if own:
        return own
    spec = role_spec(state, pod)
    return gpu_count(spec.resources) if spec is not None else 0


def gpus_per_worker(state: RunState) -> int:
    """GPUs each worker asks for, from the spec, else from any worker pod."""
    if state.job is not None and state.job.spec.worker is not None:
        from_spec = gpu_count(state.job.spec.worker.resources)
        if from_spec:
            return from_spec
    return max((gpu_count(w.observed.resources) for w in state.workers()), default=0)


def requested_gpus(state: RunState) -> int:
    """GPUs the whole run asks for: workers x GPUs per worker."""
    return state.expected_workers() * gpus_per_worker(state)


def memory_limit(state: RunState, pod: PodState) -> str | None:
    """The memory limit that applied to the pod, as written (``16Gi``)."""
    limit = pod.observed.resources.limits.get("memory")
    if limit:
        return limit
    spec = role_spec(state, pod)
    return spec.resources.limits.get("memory") if spec is not None else None


def pod_text(pod: PodState) -> tuple[str, ...]:
    """What the pod said that counts as a failure's account: the live lines judged fatal
    (:class:`~consumers.rules.state.LiveLine`) not in its tail, its log tail, then its containers'
    termination messages, line by line (a message that repeats the end of the log adds nothing).
    Nothing of a pod that exited cleanly: a run prints CUDA out-of-memory, NCCL warnings and
    signal names on its way to success, and a pod that ended with code 0 says none of it was fatal."""
    if pod.exited_cleanly:
        return ()
    tail = pod.log_tail
    # asked of every pod by most rules on every evaluation: one pass over the containers
    messages = [c.message for c in pod.containers if c.state == "terminated" and c.message]
    if messages:
        logged = set(tail)
        tail += tuple(line for message in messages for line in message.splitlines() if line not in logged)
    if not pod.live_text:
        return tail
    told = set(tail)
    return tuple(line for line in pod.live_text if line not in told) + tail


def pods_with_hits(
    state: RunState, find: Callable[[tuple[str, ...]], tuple[H, ...]]
) -> list[tuple[PodState, tuple[H, ...]]]:
    """The pods whose text (:func:`pod_text`) ``find`` finds something in, with what it found,
    workers first: a worker's own log is the most direct."""
    found = [(pod, hits) for pod in state.current_pods() if (hits := find(pod_text(pod)))]
    found.sort(key=lambda item: item[0].role == "launcher")
    return found


def other_workers(found: Sequence[tuple[PodState, object]]) -> list[PodState]:
    """The workers of ``found`` after its first pod: those that failed the same way too."""
    return [pod for pod, _ in found[1:] if pod.role != "launcher"]
