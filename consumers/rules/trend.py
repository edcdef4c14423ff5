"""Robust trends of a usage curve: a Theil-Sen line and how steadily the curve moves along it.

The Theil-Sen slope is the median of the slopes between every pair of points: a spike or a
single freed allocation moves it by at most one rank, where least squares would swing with it.
Kendall's tau (concordant minus discordant pairs, over all pairs) says how steadily the curve
climbs: near 1 for a working set that only grows, near 0 for a plateau or a sawtooth of
allocations and frees, however steep their teeth. Curves hold at most a few hundred points, so
the pairs are counted directly (n² / 2 of them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import median

from controller.contract.events import Sample

__all__ = ["FittedLine", "fit", "within"]


@dataclass(frozen=True)
class FittedLine:
    """A line through a curve: its rate per second, its level at the curve's last point, and tau."""

    slope_per_s: float
    level: float
    at: datetime
    tau: float

    def reaches(self, value: float) -> datetime | None:
        """When the line reaches ``value`` (``at`` if already there); ``None`` if it never does."""
        if self.level >= value:
            return self.at
        if self.slope_per_s <= 0:
            return None
        return self.at + timedelta(seconds=(value - self.level) / self.slope_per_s)


def within(curve: Sequence[Sample], seconds: float) -> list[Sample]:
    """The points of ``curve`` (in time order) no older than ``seconds`` before its last one."""
    if not curve:
        return []
    start = curve[-1][0] - timedelta(seconds=seconds)
    return [p for p in curve if p[0] >= start]


def fit(curve: Sequence[Sample]) -> FittedLine | None:
    """The Theil-Sen line of ``curve`` (in time order) and its Kendall tau; ``None`` under 3 points."""
    if len(curve) < 3:
        return None
    end = curve[-1][0]
    xs = [(t - end).total_seconds() for t, _ in curve]
    ys = [v for _, v in curve]
    slopes: list[float] = []
    concordant = discordant = 0
    for i in range(len(xs)):
        for j in range(i + 1, len(xs)):
            dx, dy = xs[j] - xs[i], ys[j] - ys[i]
            if dx <= 0:
                continue
            slopes.append(dy / dx)
            concordant += dy > 0
            discordant += dy < 0
    if not slopes:
        return None
    slope = median(slopes)
    level = median(y - slope * x for x, y in zip(xs, ys, strict=True))
    return FittedLine(slope_per_s=slope, level=level, at=end, tau=(concordant - discordant) / len(slopes))
