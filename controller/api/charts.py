"""What a pod used over time, drawn as inline SVG on the server (no script, no external asset).

One chart per curve: GPU utilization (0 to 100 %) and working-set memory against the pod's memory
limit. Every served reading is a point (a ``circle`` carrying its time and value in a
``<title>``, which browsers show on hover and screen readers read), joined by a line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from markupsafe import Markup, escape

from controller.api.models import PodUsage

__all__ = ["Chart", "line_chart", "pod_charts"]

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 28
GIB = 1024**3


@dataclass(frozen=True)
class Chart:
    """One drawn chart of one pod."""

    title: str
    svg: Markup
    points: int


def _fmt(value: float, unit: str) -> str:
    return f"{value / GIB:.1f} GiB" if unit == "bytes" else f"{value:.0f} %"


def line_chart(
    title: str, curve: Sequence[tuple[datetime, float]], unit: str, top: float, limit: float | None = None
) -> Markup:
    """An SVG line chart of ``curve`` from 0 to ``top`` (raised to the highest reading), with
    ``limit`` as a dashed line; ``unit`` is ``"bytes"`` or ``"pct"``."""
    top = max([top, limit or 0.0, *(v for _, v in curve)]) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    start = curve[0][0] if curve else None
    span = (curve[-1][0] - curve[0][0]).total_seconds() if len(curve) > 1 else 1.0
    span = span or 1.0

    def x(at: datetime) -> float:
        return LEFT + plot_w * ((at - start).total_seconds() / span if start else 0.0)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    for fraction in (0.0, 0.5, 1.0):
        value = top * fraction
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(value):.1f}" y2="{y(value):.1f}" class="grid"/>'
            f'<text x="{LEFT - 6}" y="{y(value) + 4:.1f}" class="axis" text-anchor="end">'
            f"{escape(_fmt(value, unit))}</text>"
        )
    if limit is not None:
        parts.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(limit):.1f}" y2="{y(limit):.1f}" class="limit"/>'
            f'<text x="{WIDTH - RIGHT - 4}" y="{y(limit) - 4:.1f}" class="axis" text-anchor="end">'
            f"limit {escape(_fmt(limit, unit))}</text>"
        )
    if curve:
        line = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in curve)
        parts.append(f'<polyline points="{line}" class="series"/>')
        for at, v in curve:
            parts.append(
                f'<circle cx="{x(at):.1f}" cy="{y(v):.1f}" r="3" class="point" data-at="{at.isoformat()}" '
                f'data-value="{v}"><title>{at:%H:%M:%S} UTC: {escape(_fmt(v, unit))}</title></circle>'
            )
        for at, anchor in ((curve[0][0], "start"), (curve[-1][0], "end")):
            parts.append(
                f'<text x="{x(at):.1f}" y="{HEIGHT - 8}" class="axis" text-anchor="{anchor}">'
                f"{at:%H:%M:%S}</text>"
            )
    else:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" class="axis" text-anchor="middle">no readings</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def pod_charts(usage: PodUsage) -> tuple[PodUsage, list[Chart]]:
    """The GPU and memory charts of one pod (a curve it has no readings of is left out)."""
    drawn: list[Chart] = []
    if usage.gpu_util_curve:
        title = f"{usage.name}: GPU utilization (mean of its GPUs)"
        svg = line_chart(title, usage.gpu_util_curve, "pct", 100.0)
        drawn.append(Chart(title, svg, len(usage.gpu_util_curve)))
    if usage.memory_curve:
        title = f"{usage.name}: memory (working set) against its limit"
        svg = line_chart(title, usage.memory_curve, "bytes", 0.0, usage.memory_limit_bytes)
        drawn.append(Chart(title, svg, len(usage.memory_curve)))
    return usage, drawn
