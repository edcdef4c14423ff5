"""Rule ``straggler``: one worker's GPUs run consistently below its peers' — the run waits for it.

In a synchronous job every step waits for the slowest rank: a worker starved by its input
pipeline, a noisy neighbour on its node, memory pressure or a slow link computes less per
second than the others (which, waiting in collectives, keep their GPUs busy). The evidence is
DCGM's ``DCGM_FI_DEV_GPU_UTIL`` per pod, as the usage reading carries it (the mean over the
pod's GPUs, one point per step).

Over the last ``straggler_s`` of the curves, each step where the peers are busy (their median at
least ``gpu_busy_pct``) is compared: a worker at least ``straggler_gap_pct`` points below its
peers' median in ``straggler_share`` of those steps is the straggler. The curves must span the
whole window (warm-up and a young pod stay quiet), and steps where the peers are not busy — a
checkpoint every worker pauses for, an evaluation the others wait through — count neither way.
More than one worker that far behind is not one straggler (an evaluation on rank 0 makes the
others wait): nothing fires. A worker whose GPUs sit idle is ``gpu-idle``'s.

The finding names the worker, how far below its peers it runs and since when, and the likely
reason where the reading shows one: its GPUs held down by the hardware for
``_THROTTLED_SHARE`` of the window (DCGM's throttle reasons: thermal, power brake, slowdown),
its working set near its memory limit or its node under ``MemoryPressure`` (the node's
condition, :mod:`consumers.rules.nodeconditions`), its node shared with another job that uses
a good part of it (:mod:`consumers.rules.cotenants`: which pods, what they use), or its CPU use
at its request (an input pipeline starved of CPU).

Without a utilization verdict, the ranks' progress lines speak (:mod:`consumers.rules.progress`:
the step or iteration counters trainers print, as the rules' log reader saw them, about every
``live_activity_s``): a rank whose counter climbs, over the last ``straggler_s`` and in each
third of it, at most ``1 - straggler_slower_ratio`` as fast as the median of the other ranks' is
the straggler, named
as its log names it (``Worker 1``, ``Rank 5 on worker-0``). Every rank must have counted over the
whole window (warm-up, and a rank that prints no counter, stay out); a pause every rank takes
(a checkpoint, an evaluation the others wait through) slows all alike. It needs each rank to
print its own counter: trainers that print on rank 0 only give it nothing to compare.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from statistics import median

from consumers.rules.cotenants import shared_node
from consumers.rules.gpuhealth import reasons_text, throttled_within
from consumers.rules.nodeconditions import spells_on
from consumers.rules.progress import cumulative
from consumers.rules.rule import Context, Detection, Rule, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.thresholds import RuleThresholds
from consumers.rules.trend import fit
from consumers.rules.usage import curve_text
from consumers.rules.wording import duration, rank_subject, who
from controller.contract.events import PodUsage
from controller.contract.units import gib

__all__ = ["STRAGGLER", "Lag", "SlowRank", "laggard", "slow_rank"]

_COVER = 0.9
"""Share of the window the curves must span (points fall on steps, not on its edges)."""
_MIN_PROGRESS = 5
"""Fewest progress counters of a rank a rate rests on."""
_CPU_BOUND = 0.9
"""Share of its CPU request a pod's mean CPU use must reach to count as CPU-bound."""
_THROTTLED_SHARE = 0.1
"""Share of the window a GPU's clocks must have been held down to name throttling as the reason."""


@dataclass(frozen=True)
class Lag:
    """One worker behind its peers: its index among the curves, its mean and theirs, since when."""

    index: int
    own_pct: float
    peers_pct: float
    since: datetime
    steps: int


def _median_without(ordered: list[float], value: float) -> float:
    """The median of ``ordered`` (sorted) less one occurrence of ``value`` (in C: no Python loop
    over the peers, which a run of hundreds of workers would make quadratic)."""
    i = bisect_left(ordered, value)
    return median(ordered[:i] + ordered[i + 1 :])


def laggard(curves: Sequence[tuple[tuple[datetime, float], ...]], th: RuleThresholds) -> Lag | None:
    """The one curve (of GPU utilization, %) consistently below the others' median over the last
    ``straggler_s``, as the module docstring says; ``None`` when there is none or more than one."""
    return _laggard(tuple(curves), th.straggler_s, th.straggler_gap_pct, th.straggler_share, th.gpu_busy_pct)


@lru_cache(maxsize=256)
def _laggard(
    curves: tuple[tuple[tuple[datetime, float], ...], ...],
    window_s: float,
    gap_pct: float,
    share: float,
    busy_pct: float,
) -> Lag | None:
    """:func:`laggard`, kept for the curves last judged (judged again at every evaluation of the
    run until the next reading)."""
    if len(curves) < 2 or any(not c for c in curves):
        return None
    end = max(c[-1][0] for c in curves)
    start = end - timedelta(seconds=window_s)
    latest_start = start + timedelta(seconds=(1 - _COVER) * window_s)
    if any(c[0][0] > latest_start for c in curves):  # a curve not spanning the window: warm-up
        return None
    at: dict[datetime, dict[int, float]] = {}
    for i, curve in enumerate(curves):
        for t, v in curve:
            if t >= start:
                at.setdefault(t, {})[i] = v
    steps = sorted(t for t, values in at.items() if len(values) == len(curves))
    ordered = {t: sorted(at[t].values()) for t in steps}
    behind: list[Lag] = []
    for i in range(len(curves)):
        peer_median = {t: _median_without(ordered[t], at[t][i]) for t in steps}
        busy = [t for t in steps if peer_median[t] >= busy_pct]
        if len(busy) < max(3, len(steps) // 2):
            continue
        gaps = [(t, at[t][i], peer_median[t]) for t in busy]
        below = [g for g in gaps if g[2] - g[1] >= gap_pct]
        if len(below) < share * len(gaps):
            continue
        first = len(gaps)
        while first > 0 and gaps[first - 1][2] - gaps[first - 1][1] >= gap_pct:
            first -= 1
        since = gaps[first][0] if first < len(gaps) else below[0][0]
        own = sum(g[1] for g in below) / len(below)
        peers = sum(g[2] for g in below) / len(below)
        behind.append(Lag(i, own, peers, since, len(below)))
    return behind[0] if len(behind) == 1 else None


def _throttling(usage: PodUsage, since: datetime) -> str | None:
    """Its GPU held down by the hardware longest within the window, if for long enough."""
    spells = [
        (share, reasons, gpu.gpu)
        for gpu in usage.gpus or ()
        if gpu.health is not None
        for share, reasons in [throttled_within(gpu.health.throttle_reasons, since)]
        if share >= _THROTTLED_SHARE
    ]
    if not spells:
        return None
    share, reasons, gpu = max(spells)
    return (
        f"its GPU {gpu} had its clocks held down by the hardware ({reasons_text(reasons)}) "
        f"for {share:.0%} of the window"
    )


def _reason(
    state: RunState, pod: PodState, usage: PodUsage, th: RuleThresholds, since: datetime
) -> str | None:
    """What the reading shows about why the worker is slow since ``since``, if anything."""
    throttled = _throttling(usage, since)
    if throttled is not None:
        return throttled
    limit, curve = usage.memory_limit_bytes, usage.memory_curve
    if limit and curve and curve[-1][1] >= th.memory_near_limit_ratio * limit:
        return f"its memory working set is at {curve[-1][1] / limit:.0%} of its {gib(limit)} limit"
    pressure = next(
        (
            s
            for s in spells_on(state, pod.node)
            if s.kind == "MemoryPressure" and (s.end is None or s.end >= since)
        ),
        None,
    )
    if pressure is not None:
        return f"its node {pressure.node} reports MemoryPressure since {pressure.start:%H:%M} UTC"
    shared = shared_node(state, pod.node, usage, th)
    if shared is not None:
        return shared
    used, asked = usage.cpu_mean_cores, usage.cpu_requested_cores
    if used and asked and used >= _CPU_BOUND * asked:
        return (
            f"it uses {used:.1f} of the {asked:g} CPU cores it requested "
            "(its input pipeline may be CPU-bound)"
        )
    return None


@dataclass(frozen=True)
class SlowRank:
    """One rank whose progress counters climb slower than its peers': its index among the series,
    its rate and the median of theirs (counts per second)."""

    index: int
    rate: float
    peers: float


def _rate(points: Sequence[tuple[datetime, float]]) -> float | None:
    line = fit(points)
    return max(line.slope_per_s, 0.0) if line is not None else None


def slow_rank(series: Sequence[Sequence[tuple[datetime, int]]], th: RuleThresholds) -> SlowRank | None:
    """The one series of progress counters (in time order) whose rate is at most
    ``1 - straggler_slower_ratio`` of its peers' median rate over the last ``straggler_s`` and in
    each third of it (consistently, not on average: a slow warm-up early in the window does not
    count); ``None`` when there is none, more than one, or a series does not span the window."""
    if len(series) < 2 or any(len(s) < _MIN_PROGRESS for s in series):
        return None
    end = max(s[-1][0] for s in series)
    start = end - timedelta(seconds=th.straggler_s)
    latest_start = start + timedelta(seconds=(1 - _COVER) * th.straggler_s)
    third = timedelta(seconds=th.straggler_s / 3)
    spans = [(start, end), *((start + third * k, start + third * (k + 1)) for k in range(3))]
    rates: list[list[float]] = []  # per series: the whole window's rate, then each third's
    for points in series:
        if points[0][0] > latest_start:
            return None  # warm-up: not counting over the whole window yet
        counted = list(zip((t for t, _ in points), cumulative([n for _, n in points]), strict=True))
        found = [_rate([(t, float(n)) for t, n in counted if lo <= t <= hi]) for lo, hi in spans]
        if any(r is None for r in found):
            return None
        rates.append([r for r in found if r is not None])
    slow: list[SlowRank] = []
    for i, own in enumerate(rates):
        peers = [median(r[k] for j, r in enumerate(rates) if j != i) for k in range(len(spans))]
        if all(p > 0 and o <= (1 - th.straggler_slower_ratio) * p for o, p in zip(own, peers, strict=True)):
            slow.append(SlowRank(i, own[0], peers[0]))
    return slow[0] if len(slow) == 1 else None


def _by_progress(state: RunState, ctx: Context) -> Detection | None:
    """``straggler`` read from the ranks' progress lines (see the module docstring)."""
    launcher = state.launcher()
    pods = [*state.workers(), *([launcher] if launcher is not None else [])]
    ranks = [
        (pod, rank, points)
        for pod in pods
        if not pod.deleted
        for rank, points in sorted(pod.progress.items(), key=lambda item: (item[0] is None, item[0] or 0))
    ]
    lag = slow_rank([points for _, _, points in ranks], ctx.thresholds)
    if lag is None:
        return None
    pod, rank, points = ranks[lag.index]
    subject = rank_subject(state, pod, rank)
    slower = 1 - lag.rate / lag.peers
    last = points[-1]
    host = _worker_of(state, pod, rank)
    usage = state.usage_of(host) if host is not None else None
    window = last[0] - timedelta(seconds=ctx.thresholds.straggler_s)
    reason = _reason(state, host, usage, ctx.thresholds, window) if host and usage else None
    return Detection(
        root_cause=f"{subject} is a straggler: its progress lines count {lag.rate:.2f} steps/s while its "
        f"peers' count {lag.peers:.2f} ({slower:.0%} slower) over the last "
        f"{duration(ctx.thresholds.straggler_s)}" + (f"; {reason}" if reason else ""),
        evidence=(pod_fact(pod, "log.progress", f"step {last[1]} at {last[0]:%H:%M:%S} UTC"),),
        key=(pod.uid, str(rank)),
    )


def _worker_of(state: RunState, pod: PodState, rank: int | None) -> PodState | None:
    """The worker a rank runs on: the pod itself, or for a rank in the launcher's output the
    worker its slot maps to (ranks fill each worker's slots in order)."""
    if pod.role != "launcher":
        return pod
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    if rank is None or not slots:
        return None
    return next((w for w in state.workers() if w.index == rank // slots), None)


def _detect_straggler(state: RunState, ctx: Context) -> Detection | None:
    if state.finished or state.phase != "Running":
        return None
    return _by_utilization(state, ctx) or _by_progress(state, ctx)


def _by_utilization(state: RunState, ctx: Context) -> Detection | None:
    """``straggler`` read from the workers' GPU utilization (see the module docstring)."""
    read = [
        (w, u)
        for w in state.workers()
        if not w.deleted and (u := state.usage_of(w)) is not None and u.gpus and u.gpu_util_curve
    ]
    lag = laggard([u.gpu_util_curve for _, u in read], ctx.thresholds)
    if lag is None:
        return None
    worker, usage = read[lag.index]
    end = usage.gpu_util_curve[-1][0]
    window = end - timedelta(seconds=ctx.thresholds.straggler_s)
    reason = _reason(state, worker, usage, ctx.thresholds, window)
    peers = [(w, u) for w, u in read if w is not worker][:3]
    evidence = [
        pod_fact(w, "usage.gpu.utilization", curve_text(u.gpu_util_curve, "%", digits=0))
        for w, u in [(worker, usage), *peers]
    ]
    if worker.node:
        evidence.append(pod_fact(worker, "spec.nodeName", worker.node))
    return Detection(
        root_cause=f"{who(worker)} is a straggler: its GPUs have run at {lag.own_pct:.0f} % while its peers' "
        f"ran at {lag.peers_pct:.0f} % for {duration((end - lag.since).total_seconds())} "
        f"(since {lag.since:%H:%M} UTC)" + (f"; {reason}" if reason else ""),
        evidence=tuple(evidence),
        key=(worker.uid,),
    )


STRAGGLER = Rule(
    id="straggler",
    kind="stall",
    severity="warning",
    summary="One worker's GPUs run consistently below its peers': every step waits for it, and the "
    "whole run goes at its pace.",
    remediation=(
        "Compare that worker's node with the others': kubectl describe node (other pods on it, "
        "allocated CPU), nvidia-smi -q -d PERFORMANCE,CLOCK for a throttled GPU.",
        "An input pipeline that cannot keep up shows as a GPU waiting on data: raise data-loader "
        "workers or the pod's CPU request, or pre-process the shard of that rank.",
        "An uneven split of the data (a larger shard, longer sequences) makes one rank slower; "
        "delete the pod to have it rescheduled if its node is shared or degraded.",
    ),
    detect=_detect_straggler,
)
