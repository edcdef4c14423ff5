"""Rules on what the pods used (``UsageObserved``, read from the cluster's Prometheus).

- ``gpu-idle``: one worker's GPUs have been idle (mean utilization at most ``gpu_idle_pct``)
  for ``gpu_idle_s`` while the other workers' GPUs were busy (at least ``gpu_busy_pct`` over the
  same span): the straggler, or the rank that hangs the collective. A run whose GPUs are all
  idle (a checkpoint, an evaluation on one rank) is not this: nothing fires.
- ``memory-near-limit``: a pod's working set is above ``memory_near_limit_ratio`` of its
  memory limit *and rising* (its last third higher than its first by ``memory_rise_ratio`` of
  the limit): the OOM kill is coming. A working set that sits flat near its limit (page cache,
  a steady state) stays quiet.

Both judge the curves of the latest reading (they span ``usage.window_s``, so the thresholds
must stay below it), measured in the series' own time, and only while the run lives. The
evidence carries the curve. :func:`memory_curve_fact` lends the same curve to ``oom``.
"""

from __future__ import annotations

from consumers.rules.rule import Context, Detection, Rule, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, duration, who
from controller.contract.events import PodUsage, Sample
from controller.contract.findings import Evidence
from controller.contract.units import GIB, gib

_MIN_POINTS = 3


def curve_text(curve: tuple[Sample, ...], unit: str, scale: float = 1.0, digits: int = 1) -> str:
    """``12.1 12.9 … 15.8 GiB (06:10→06:40 UTC)``: the values of a curve and its span."""
    values = " ".join(f"{value / scale:.{digits}f}" for _, value in curve)
    return f"{values} {unit} ({curve[0][0]:%H:%M}→{curve[-1][0]:%H:%M} UTC)"


def memory_curve_fact(pod: PodState, usage: PodUsage | None) -> Evidence | None:
    """The pod's memory working set as last read, if any."""
    if usage is None or not usage.memory_curve:
        return None
    return pod_fact(pod, "usage.memory.workingSet", curve_text(usage.memory_curve, "GiB", GIB))


def _idle_for(curve: tuple[Sample, ...], idle_pct: float) -> tuple[float, Sample] | None:
    """How long the curve has been at or below ``idle_pct`` at its end, and where that began."""
    if not curve or curve[-1][1] > idle_pct:
        return None
    first = len(curve) - 1
    while first > 0 and curve[first - 1][1] <= idle_pct:
        first -= 1
    return (curve[-1][0] - curve[first][0]).total_seconds(), curve[first]


def _busy_since(usage: PodUsage, since: Sample) -> float | None:
    """Mean utilization of a pod's GPUs from ``since`` on; ``None`` without points there."""
    values = [v for t, v in usage.gpu_util_curve if t >= since[0]]
    return sum(values) / len(values) if values else None


def _detect_gpu_idle(state: RunState, ctx: Context) -> Detection | None:
    if state.finished or state.phase != "Running":
        return None
    th = ctx.thresholds
    read = [
        (w, u)
        for w in state.workers()
        if not w.deleted and (u := state.usage_of(w)) is not None and u.gpus and u.gpu_util_curve
    ]
    if len(read) < 2:
        return None
    idle: list[tuple[PodState, PodUsage, float]] = []
    for worker, usage in read:
        spell = _idle_for(usage.gpu_util_curve, th.gpu_idle_pct)
        if spell is None or spell[0] < th.gpu_idle_s:
            continue
        others = [
            mean
            for other, other_usage in read
            if other is not worker and (mean := _busy_since(other_usage, spell[1])) is not None
        ]
        if others and min(others) >= th.gpu_busy_pct and len(others) == len(read) - 1:
            idle.append((worker, usage, spell[0]))
    if not idle or len(idle) == len(read):
        return None
    first, usage, seconds = idle[0]
    busy = [u for w, u in read if all(w is not i for i, _, _ in idle)]
    busy_mean = sum(_busy_since(u, u.gpu_util_curve[0]) or 0.0 for u in busy) / len(busy)
    shown = [(w, u) for w, u, _ in idle] + [(w, u) for w, u in read if u in busy][:3]
    evidence = [
        pod_fact(w, "usage.gpu.utilization", curve_text(u.gpu_util_curve, "%", digits=0)) for w, u in shown
    ]
    return Detection(
        root_cause=f"{who(first)}'s GPUs have been idle for {duration(seconds)} while the other "
        f"workers' run at {busy_mean:.0f} %{also([w for w, _, _ in idle[1:]])}",
        evidence=tuple(evidence),
        key=tuple(w.uid for w, _, _ in idle),
    )


def _rising(curve: tuple[Sample, ...], limit: float, rise: float) -> bool:
    third = max(len(curve) // 3, 1)
    head = sum(v for _, v in curve[:third]) / third
    tail = sum(v for _, v in curve[-third:]) / third
    return tail - head >= rise * limit


def _detect_memory_near_limit(state: RunState, ctx: Context) -> Detection | None:
    if state.finished:
        return None
    th = ctx.thresholds
    near: list[tuple[PodState, PodUsage]] = []
    for pod in state.current_pods():
        usage = state.usage_of(pod)
        if pod.deleted or pod.phase != "Running" or usage is None or usage.final:
            continue
        limit, curve = usage.memory_limit_bytes, usage.memory_curve
        if not limit or len(curve) < _MIN_POINTS or curve[-1][1] <= th.memory_near_limit_ratio * limit:
            continue
        if _rising(curve, limit, th.memory_rise_ratio):
            near.append((pod, usage))
    if not near:
        return None
    first, usage = near[0]
    assert usage.memory_limit_bytes is not None
    last = usage.memory_curve[-1][1]
    evidence: list[Evidence] = []
    for pod, u in near:
        evidence.append(pod_fact(pod, "resources.limits.memory", gib(u.memory_limit_bytes or 0)))
        if (fact := memory_curve_fact(pod, u)) is not None:
            evidence.append(fact)
    return Detection(
        root_cause=f"{who(first)} is at {gib(last)} of its {gib(usage.memory_limit_bytes)} memory limit "
        f"({last / usage.memory_limit_bytes:.0%}) and rising{also([p for p, _ in near[1:]])}",
        evidence=tuple(evidence),
        key=tuple(p.uid for p, _ in near),
    )


GPU_IDLE = Rule(
    id="gpu-idle",
    kind="stall",
    severity="warning",
    summary="One worker's GPUs sit idle while the other workers' are busy: a straggler, or the rank "
    "the others wait for.",
    remediation=(
        "Look at that worker's log first: a rank stuck in data loading, I/O or a collective the "
        "others passed (py-spy dump, or NCCL_DEBUG=INFO) shows where it waits.",
        "Check the worker's node: a throttled or failing GPU (nvidia-smi -q), a slow disk or network.",
        "An uneven split of the data or of the work between ranks makes one finish early and wait.",
    ),
    detect=_detect_gpu_idle,
)

MEMORY_NEAR_LIMIT = Rule(
    id="memory-near-limit",
    kind="stall",
    severity="warning",
    summary="A pod's memory working set is close to its limit and still growing: an OOM kill is coming.",
    remediation=(
        "Raise the memory limit of that role (resources.limits.memory in its pod template) before "
        "the kernel kills it, or lower per-rank memory use: batch size, data-loader workers, prefetching.",
        "Memory that only grows across steps is often a leak: tensors kept in a list, a growing cache.",
    ),
    detect=_detect_memory_near_limit,
)
