"""Rule ``oom-predicted``: a worker's working set, at its current rate, reaches its limit soon.

The curve is the pod's memory working set as last read (cAdvisor's
``container_memory_working_set_bytes``: active memory, not the page cache the kernel reclaims
before it kills), the highest value of each step, so no peak is lost between points. Over the
last ``oom_trend_s`` of it, a Theil-Sen line (:mod:`consumers.rules.trend`) gives the rate; the
rule warns when

- the curve spans the whole trend window (a pod warming up, loading its model and data, is not
  judged before it has run that long);
- it climbs steadily: Kendall's tau over the window at least ``oom_trend_tau`` (a sawtooth of
  allocations and frees, or a plateau with noise, stays well under it);
- it still climbs now: the rate is the lower of the slopes of the window's recent half and of
  its last third, from the recent half's level (memory that rose and then levelled off has a
  flat last third; a leak that began mid-window is measured at its own rate);
- at that rate the line reaches the pod's memory limit within ``oom_horizon_s`` of the reading.

The finding gives the rate and the projected time. :func:`foreseen` replays the same judgement
over the curve read before a kill, so that ``oom`` says whether, and how early, it was seen
coming.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from statistics import median

from consumers.rules.rule import Context, Detection, Rule, pod_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.thresholds import RuleThresholds
from consumers.rules.trend import FittedLine, fit, within
from consumers.rules.usage import memory_curve_fact
from consumers.rules.wording import also, duration, who
from controller.contract.events import PodUsage, Sample
from controller.contract.findings import Evidence
from controller.contract.units import GIB, gib

__all__ = ["OOM_PREDICTED", "Forecast", "forecast", "foreseen"]

MIN_POINTS = 5
"""Fewest points of the trend span a forecast rests on."""
_COVER = 0.9
"""Share of ``oom_trend_s`` the curve must span: a pod younger than that is warming up (loading
its model and data, its allocator growing) and is not judged."""


def _span_s(points: list[Sample]) -> float:
    return (points[-1][0] - points[0][0]).total_seconds()


@dataclass(frozen=True)
class Forecast:
    """A working set on course for its limit: the line, the limit, and when they meet."""

    trend: FittedLine
    limit: float
    reaches: datetime

    @property
    def lead_s(self) -> float:
        """Seconds from the reading to the projected kill."""
        return (self.reaches - self.trend.at).total_seconds()


def forecast(curve: tuple[Sample, ...], limit: float | None, th: RuleThresholds) -> Forecast | None:
    """Whether ``curve`` (bytes, in time order) reaches ``limit`` within the horizon at its
    current, steady rate (see the module docstring)."""
    return _forecast(curve, limit, th.oom_trend_s, th.oom_trend_tau, th.oom_horizon_s)


@lru_cache(maxsize=1024)
def _forecast(
    curve: tuple[Sample, ...], limit: float | None, trend_s: float, tau: float, horizon_s: float
) -> Forecast | None:
    """:func:`forecast`, kept for the curves last judged: a reading's curve is judged again at
    every evaluation of its run until the next reading, and a fit costs n² / 2 pairs."""
    points = within(curve, trend_s)
    if not limit or len(points) < MIN_POINTS or _span_s(points) < _COVER * trend_s:
        return None
    whole, recent, last = (
        fit(points),
        fit(points[len(points) // 2 :]),
        fit(points[-max(len(points) // 3, 3) :]),
    )
    if whole is None or recent is None or last is None or whole.tau < tau:
        return None
    rate = min(recent.slope_per_s, last.slope_per_s)
    if rate <= 0:
        return None
    trend = FittedLine(slope_per_s=rate, level=recent.level, at=whole.at, tau=whole.tau)
    reaches = trend.reaches(limit)
    if reaches is None or (reaches - trend.at).total_seconds() > horizon_s:
        return None
    return Forecast(trend, limit, reaches)


def foreseen(usage: PodUsage | None, th: RuleThresholds, until: datetime | None = None) -> Forecast | None:
    """The first forecast the pod's memory curve gave, replayed point by point up to ``until``
    (the kill), or ``None`` if it never gave one."""
    if usage is None:
        return None
    curve = tuple(p for p in usage.memory_curve if until is None or p[0] <= until)
    for end in range(MIN_POINTS, len(curve) + 1):
        found = forecast(curve[:end], usage.memory_limit_bytes, th)
        if found is not None:
            return found
    return None


def rate_text(trend: FittedLine) -> str:
    """``0.42 GiB/min``."""
    return f"{trend.slope_per_s * 60 / GIB:.2f} GiB/min"


def _detect_oom_predicted(state: RunState, ctx: Context) -> Detection | None:
    if state.finished:
        return None
    coming: list[tuple[PodState, PodUsage, Forecast]] = []
    for pod in state.current_pods():
        usage = state.usage_of(pod)
        if pod.deleted or pod.phase != "Running" or usage is None or usage.final:
            continue
        found = forecast(usage.memory_curve, usage.memory_limit_bytes, ctx.thresholds)
        if found is not None:
            coming.append((pod, usage, found))
    if not coming:
        return None
    coming.sort(key=lambda item: item[2].reaches)
    first, _, soonest = coming[0]
    evidence: list[Evidence] = []
    for pod, usage, found in coming:
        evidence.append(pod_fact(pod, "resources.limits.memory", gib(found.limit)))
        trend = f"{rate_text(found.trend)}, tau {found.trend.tau:.2f}"
        evidence.append(pod_fact(pod, "usage.memory.trend", trend))
        if (fact := memory_curve_fact(pod, usage)) is not None:
            evidence.append(fact)
    return Detection(
        root_cause=f"{who(first)}'s memory working set is growing {rate_text(soonest.trend)} "
        f"({gib(soonest.trend.level)} of its {gib(soonest.limit)} limit): at this rate it reaches the "
        f"limit around {soonest.reaches:%H:%M} UTC, {duration(soonest.lead_s)} after the reading"
        f"{also([p for p, _, _ in coming[1:]])}",
        evidence=tuple(evidence),
        key=tuple(p.uid for p, _, _ in coming),
    )


def foreseen_text(usage: PodUsage | None, th: RuleThresholds, killed: datetime | None) -> str:
    """How ``oom`` tells whether the kill was seen coming: ``; foreseen at 10:21 UTC, 9m before
    the kill, by its working-set trend``; empty without a memory curve read before the kill fine
    enough to hold a trend window."""
    curve = [t for t, _ in usage.memory_curve if killed is None or t <= killed] if usage is not None else []
    if len(curve) < MIN_POINTS or median(
        (b - a).total_seconds() for a, b in itertools.pairwise(curve)
    ) > th.oom_trend_s / (MIN_POINTS - 1):
        return ""  # too few points, or too far apart for a trend window (a long life read at its end)
    found = foreseen(usage, th, killed)
    if found is None:
        return "; its working-set trend did not foresee it"
    lead = f", {duration((killed - found.trend.at).total_seconds())} before the kill" if killed else ""
    return f"; foreseen at {found.trend.at:%H:%M} UTC{lead}, by its working-set trend"


OOM_PREDICTED = Rule(
    id="oom-predicted",
    kind="stall",
    severity="warning",
    summary="A pod's memory working set climbs steadily toward its limit and, at its current rate, "
    "reaches it within the horizon: an OOM kill is coming.",
    remediation=(
        "Checkpoint now if the job can, then raise the memory limit of that role "
        "(resources.limits.memory in its pod template) or lower per-rank memory use: batch size, "
        "data-loader workers, prefetch depth.",
        "A working set that grows with every step is usually a leak: tensors kept across steps "
        "(losses appended without .item()), a growing cache, a data loader holding references.",
        "See the curve: kubectl -n {namespace} top pod -l training.kubeflow.org/job-name={job}, or "
        "the job's Metrics tab.",
    ),
    detect=_detect_oom_predicted,
)
