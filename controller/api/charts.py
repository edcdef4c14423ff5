"""What a pod used over time and how its GPUs fared, drawn as inline SVG on the server (no script,
no external asset).

One chart per curve: GPU utilization (0 to 100 %) and working-set memory against the pod's memory
limit. Every served reading is a point (a ``circle`` carrying its time and value in a
``<title>``, which browsers show on hover and screen readers read), joined by a line.

On the charts, what went wrong: a vertical mark where a GPU of the pod reported a fault to DCGM
(a new Xid, double-bit ECC errors, remapped rows, a failed remapping, NVLink errors), a band
where the hardware held a GPU's clocks down, a mark where a ``gpu-fault``, ``gpu-throttled``,
``oom-predicted`` or ``straggler`` finding naming the pod was first seen, and for
``oom-predicted`` the memory's straight-line projection (least squares over the readings up to
the finding) to where it meets the limit. Beside them :func:`gpu_rows`, one line per GPU: its
Xids with the catalogue's meaning (:mod:`controller.contract.xids`), the throttle reasons seen
and its temperature.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Literal

from markupsafe import Markup, escape

from controller.api.models import Finding, PodUsage
from controller.contract.events import GpuHealth, Sample
from controller.contract.xids import THROTTLE_REASONS, THROTTLING, clock_reasons, xid

__all__ = [
    "HEALTH_RULES",
    "Chart",
    "GpuRow",
    "Mark",
    "Span",
    "gpu_rows",
    "line_chart",
    "marks_of",
    "pod_charts",
    "projection",
]

WIDTH, HEIGHT = 640, 200
LEFT, RIGHT, TOP, BOTTOM = 64, 12, 12, 28
GIB = 1024**3
HEALTH_RULES = ("gpu-fault", "gpu-throttled", "oom-predicted", "straggler")
"""The findings marked on a pod's charts."""
PROJECTION_POINTS = 10
"""Readings the ``oom-predicted`` projection is fitted on (the last ones up to the finding)."""
_COUNTERS = (
    ("ecc_dbe", "ECC", "double-bit ECC errors"),
    ("remapped_rows", "remap", "rows remapped for uncorrectable errors"),
    ("remap_failure", "remap failed", "a failed row remapping"),
    ("nvlink_errors", "NVLink", "NVLink errors"),
)


@dataclass(frozen=True)
class Mark:
    """A moment marked on a pod's charts: a GPU fault (``fault``) or a finding (``finding``)."""

    at: datetime
    label: str
    kind: Literal["fault", "finding"]
    note: str


@dataclass(frozen=True)
class Span:
    """A spell during which the hardware held a GPU's clocks down."""

    start: datetime
    end: datetime
    label: str


@dataclass(frozen=True)
class Chart:
    """One drawn chart of one pod."""

    title: str
    svg: Markup
    points: int


@dataclass(frozen=True)
class GpuRow:
    """One GPU of a pod in the Metrics tab's health table."""

    gpu: str
    model: str | None
    node: str | None
    xids: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)
    throttle: list[str] = field(default_factory=list)
    temperature: str | None = None


def _fmt(value: float, unit: str) -> str:
    return f"{value / GIB:.1f} GiB" if unit == "bytes" else f"{value:.0f} %"


def _new_codes(curve: Sequence[Sample]) -> list[tuple[datetime, int]]:
    """Each time the last-Xid gauge changed to a new non-zero code (a code already set at the first
    point is from before the pod)."""
    return [(at, int(value)) for (_, before), (at, value) in pairwise(curve) if value not in (before, 0)]


def _first_rise(curve: Sequence[Sample]) -> datetime | None:
    """When a cumulative counter first rose within the curve."""
    return next((at for (_, before), (at, value) in pairwise(curve) if value > before), None)


def _spells(curve: Sequence[Sample], until: datetime) -> list[tuple[datetime, datetime, int]]:
    """The spells with a hardware throttle reason set: start, end (the next reading without one,
    or ``until``) and the reasons' bits."""
    found: list[tuple[datetime, datetime, int]] = []
    start: datetime | None = None
    bits = 0
    for at, value in curve:
        held = int(value) & THROTTLING
        if held and start is None:
            start, bits = at, held
        elif held and start is not None:
            bits |= held
        elif not held and start is not None:
            found.append((start, at, bits))
            start, bits = None, 0
    if start is not None:
        found.append((start, until, bits))
    return found


def _held(bits: int) -> str:
    return ", ".join(words for bit, words in THROTTLE_REASONS.items() if bits & bit)


def _health_marks(gpu: str, health: GpuHealth, until: datetime) -> tuple[list[Mark], list[Span]]:
    marks = [
        Mark(at, f"Xid {code}", "fault", f"GPU {gpu}: Xid {code}, {xid(code).meaning}")
        for at, code in _new_codes(health.xid)
    ]
    for name, label, words in _COUNTERS:
        rose = _first_rise(getattr(health, name))
        if rose is not None:
            marks.append(Mark(rose, label, "fault", f"GPU {gpu}: {words}"))
    spans = [
        Span(start, end, f"GPU {gpu}: {_held(bits)}")
        for start, end, bits in _spells(health.throttle_reasons, until)
    ]
    return marks, spans


def marks_of(usage: PodUsage, findings: Sequence[Finding]) -> tuple[list[Mark], list[Span]]:
    """What to mark on one pod's charts: its GPUs' faults and throttle spells, and the firsts of
    the :data:`HEALTH_RULES` findings whose evidence names the pod."""
    marks: list[Mark] = []
    spans: list[Span] = []
    for gpu in usage.gpus or ():
        if gpu.health is not None:
            found, held = _health_marks(gpu.gpu, gpu.health, usage.until)
            marks.extend(found)
            spans.extend(held)
    source = f"pod/{usage.name}"
    for finding in findings:
        if finding.rule in HEALTH_RULES and any(e.source == source for e in finding.evidence):
            marks.append(Mark(finding.first_seen, finding.rule, "finding", finding.root_cause))
    return sorted(marks, key=lambda m: m.at), sorted(spans, key=lambda s: s.start)


def projection(usage: PodUsage, findings: Sequence[Finding]) -> tuple[Sample, Sample] | None:
    """Where an ``oom-predicted`` finding naming the pod sees its memory going: a straight line fitted
    on the last :data:`PROJECTION_POINTS` readings up to the finding, from the last of them to
    where it meets the limit; ``None`` without such a finding, a limit or a climb."""
    source = f"pod/{usage.name}"
    finding = next(
        (f for f in findings if f.rule == "oom-predicted" and any(e.source == source for e in f.evidence)),
        None,
    )
    limit = usage.memory_limit_bytes
    if finding is None or not limit:
        return None
    points = [(at, v) for at, v in usage.memory_curve if at <= finding.last_seen][-PROJECTION_POINTS:]
    if len(points) < 2:
        return None
    origin = points[0][0]
    slope, _ = statistics.linear_regression(
        [(at - origin).total_seconds() for at, _ in points], [v for _, v in points]
    )
    last_at, last = points[-1]
    if slope <= 0 or last >= limit:
        return None
    return (last_at, last), (last_at + timedelta(seconds=(limit - last) / slope), limit)


def gpu_rows(usage: PodUsage) -> list[GpuRow]:
    """The health table's lines: one per GPU of the pod that DCGM reported health series of."""
    rows: list[GpuRow] = []
    for gpu in usage.gpus or ():
        health = gpu.health
        if health is None:
            continue
        xids = [f"Xid {code} at {at:%H:%M:%S}: {xid(code).meaning}" for at, code in _new_codes(health.xid)]
        faults = [
            f"{words} from {at:%H:%M:%S}"
            for name, _, words in _COUNTERS
            if (at := _first_rise(getattr(health, name))) is not None
        ]
        seen = 0
        for _, value in health.throttle_reasons:
            seen |= int(value)
        throttle = [
            f"{_held(bits)} {start:%H:%M:%S}-{end:%H:%M:%S}"
            for start, end, bits in _spells(health.throttle_reasons, usage.until)
        ]
        normal = clock_reasons(seen & ~THROTTLING)
        if normal:
            throttle.append(f"also (normal): {', '.join(normal)}")
        temps = [v for _, v in health.temperature_c]
        temperature = f"{temps[-1]:.0f} °C (max {max(temps):.0f} °C)" if temps else None
        rows.append(GpuRow(gpu.gpu, gpu.model, health.hostname, xids, faults, throttle, temperature))
    return rows


def line_chart(
    title: str,
    curve: Sequence[Sample],
    unit: str,
    top: float,
    limit: float | None = None,
    marks: Sequence[Mark] = (),
    spans: Sequence[Span] = (),
    ahead: tuple[Sample, Sample] | None = None,
) -> Markup:
    """An SVG line chart of ``curve`` from 0 to ``top`` (raised to the highest reading), with
    ``limit`` as a dashed line, ``marks`` and ``spans`` within the curve's time, and ``ahead`` (a
    projection) as a dotted line the time axis stretches to; ``unit`` is ``"bytes"`` or ``"pct"``."""
    top = max([top, limit or 0.0, *(v for _, v in curve)]) or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    start = curve[0][0] if curve else None
    end = curve[-1][0] if curve else None
    if ahead is not None and end is not None:
        end = max(end, ahead[1][0])
    span = (end - start).total_seconds() if start is not None and end is not None else 1.0
    span = span or 1.0

    def x(at: datetime) -> float:
        if start is None:
            return float(LEFT)
        return LEFT + plot_w * min(max((at - start).total_seconds() / span, 0.0), 1.0)

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / top)

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        f'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    if curve:
        for held in spans:
            left, right = x(held.start), x(held.end)
            parts.append(
                f'<rect x="{left:.1f}" y="{TOP}" width="{max(right - left, 2.0):.1f}" height="{plot_h}" '
                f'class="throttle" data-start="{held.start.isoformat()}" data-end="{held.end.isoformat()}">'
                f"<title>{held.start:%H:%M:%S}-{held.end:%H:%M:%S} UTC: {escape(held.label)}</title></rect>"
            )
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
    if curve and end is not None:
        line = " ".join(f"{x(at):.1f},{y(v):.1f}" for at, v in curve)
        parts.append(f'<polyline points="{line}" class="series"/>')
        for at, v in curve:
            parts.append(
                f'<circle cx="{x(at):.1f}" cy="{y(v):.1f}" r="3" class="point" data-at="{at.isoformat()}" '
                f'data-value="{v}"><title>{at:%H:%M:%S} UTC: {escape(_fmt(v, unit))}</title></circle>'
            )
        if ahead is not None:
            (a_at, a_v), (b_at, b_v) = ahead
            parts.append(
                f'<line x1="{x(a_at):.1f}" y1="{y(a_v):.1f}" x2="{x(b_at):.1f}" y2="{y(b_v):.1f}" '
                f'class="projection" data-reaches="{b_at.isoformat()}"><title>projected to reach '
                f"{escape(_fmt(b_v, unit))} around {b_at:%H:%M} UTC</title></line>"
            )
        for i, mark in enumerate(m for m in marks if curve[0][0] <= m.at <= end):
            at_x = x(mark.at)
            parts.append(
                f'<g class="mark mark-{mark.kind}" data-at="{mark.at.isoformat()}" '
                f'data-label="{escape(mark.label)}">'
                f'<line x1="{at_x:.1f}" x2="{at_x:.1f}" y1="{TOP}" y2="{TOP + plot_h}"/>'
                f'<text x="{at_x + 3:.1f}" y="{TOP + 12 + 12 * (i % 3)}" class="mark-label">'
                f"{escape(mark.label)}</text>"
                f"<title>{mark.at:%H:%M:%S} UTC: {escape(mark.note)}</title></g>"
            )
        for edge, anchor in ((curve[0][0], "start"), (end, "end")):
            parts.append(
                f'<text x="{x(edge):.1f}" y="{HEIGHT - 8}" class="axis" text-anchor="{anchor}">'
                f"{edge:%H:%M:%S}</text>"
            )
    else:
        parts.append(
            f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" class="axis" text-anchor="middle">no readings</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def pod_charts(usage: PodUsage, findings: Sequence[Finding] = ()) -> tuple[PodUsage, list[Chart]]:
    """The GPU and memory charts of one pod, marked with its GPUs' health and the findings naming
    it (a curve it has no readings of is left out)."""
    marks, spans = marks_of(usage, findings)
    drawn: list[Chart] = []
    if usage.gpu_util_curve:
        title = f"{usage.name}: GPU utilization (mean of its GPUs)"
        svg = line_chart(title, usage.gpu_util_curve, "pct", 100.0, marks=marks, spans=spans)
        drawn.append(Chart(title, svg, len(usage.gpu_util_curve)))
    if usage.memory_curve:
        title = f"{usage.name}: memory (working set) against its limit"
        svg = line_chart(
            title,
            usage.memory_curve,
            "bytes",
            0.0,
            usage.memory_limit_bytes,
            marks=marks,
            ahead=projection(usage, findings),
        )
        drawn.append(Chart(title, svg, len(usage.memory_curve)))
    return usage, drawn
