"""DCGM's health series of a pod's GPUs: which are read, and how one answer becomes curves.

The usage reading (:mod:`watchers.usage`) asks them in one range query per namespace, a
``__name__`` matcher over :data:`HEALTH_METRICS` with the same pod mapping as the utilization
(``A or B`` over both label pairs), sampled at the reading's step. Each series is one metric of
one GPU (DCGM's ``gpu`` label, else ``UUID``) of one pod; :func:`health_points` turns them into
points per GPU and field of :class:`~controller.contract.events.GpuHealth`, the four NVLink
error counters summed, the throttle reasons OR-ed where several series meet, each curve kept
as the points where its value changed (and its first and last).

Two things real exporters do that the curves must not take for the GPU's own values: a field the
GPU does not support (ECC on a consumer board, NVLink without links) or DCGM could not read is a
*blank* sentinel, not a number — ``9223372036854775794`` is ``DCGM_FT_INT64_BLANK + 2`` ("not
supported"), as dcgm-exporter's own README shows for ``DCGM_FI_DEV_MEMORY_TEMP`` and as its
releases before the filter (2020) and exporters built on the old bindings still send — and is
left out (:func:`is_blank`), or a counter blank one step and ``0`` the next would read as an
increase of 9.2e18 errors; and the node's name is ``Hostname`` in older dcgm-exporter releases,
``hostname`` in newer ones: either is read.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from controller.prometheus import Series

__all__ = [
    "HEALTH_FIELDS",
    "HEALTH_METRICS",
    "bits",
    "common_bits",
    "health_points",
    "health_selector",
    "is_blank",
]

HEALTH_METRICS: dict[str, str] = {
    "DCGM_FI_DEV_XID_ERRORS": "xid",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "ecc_dbe",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "remapped_rows",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "remap_failure",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "nvlink_errors",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "throttle_reasons",
    "DCGM_FI_DEV_GPU_TEMP": "temperature_c",
}
"""Each health series DCGM exports, by the :class:`GpuHealth` field it feeds."""
HEALTH_FIELDS = tuple(dict.fromkeys(HEALTH_METRICS.values()))

_BLANKS: tuple[float, ...] = (2147483632.0, 140737488355328.0, 9223372036854775792.0)
"""DCGM's blank values (``DCGM_FT_INT32_BLANK``, ``DCGM_FT_FP64_BLANK``, ``DCGM_FT_INT64_BLANK``);
each is followed by its not-found, not-supported and not-permissioned values."""


def is_blank(value: float) -> bool:
    """Whether ``value`` is one of DCGM's blank sentinels rather than a reading."""
    return any(blank <= value <= blank + 3 for blank in _BLANKS) or value >= _BLANKS[-1]


def health_selector(matchers: str) -> str:
    """The selector of every health series whose other labels match ``matchers``."""
    names = "|".join(sorted(HEALTH_METRICS))
    return f'{{__name__=~"{names}",{matchers}}}'


def bits(values: Sequence[float]) -> float:
    """Bitmasks merged: every bit set in any of them."""
    merged = 0
    for value in values:
        merged |= int(value)
    return float(merged)


def common_bits(values: Sequence[float]) -> float:
    """Bitmasks merged: the bits set in every one of them."""
    merged = ~0
    for value in values:
        merged &= int(value)
    return float(merged if values else 0)


def _combine(field: str, values: list[float]) -> float:
    if field == "throttle_reasons":
        return bits(values)
    if field == "nvlink_errors":
        return sum(values)
    return max(values)


def health_points(
    series: Iterable[Series], lo: float, hi: float
) -> dict[str, tuple[dict[str, str | None], dict[str, list[tuple[float, float]]]]]:
    """Per GPU: where DCGM says it is (``hostname``, ``pci_bus_id``) and, per
    :data:`HEALTH_FIELDS` entry it exports, its points within ``[lo, hi]`` in time order (several
    series at one time combined)."""
    at: dict[str, dict[str, dict[float, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    where: dict[str, dict[str, str | None]] = {}
    for one in series:
        labels: Mapping[str, str] = one.labels
        field = HEALTH_METRICS.get(labels.get("__name__", ""))
        if field is None:
            continue
        gpu = labels.get("gpu") or labels.get("UUID") or "0"
        where.setdefault(
            gpu,
            {
                "hostname": labels.get("Hostname") or labels.get("hostname") or None,
                "pci_bus_id": labels.get("pci_bus_id") or None,
            },
        )
        for t, v in one.points:
            if lo <= t <= hi and math.isfinite(v) and not is_blank(v):
                at[gpu][field][t].append(v)
    return {
        gpu: (
            where[gpu],
            {
                f: _changes([(t, _combine(f, vs)) for t, vs in sorted(points.items())])
                for f, points in fields.items()
            },
        )
        for gpu, fields in at.items()
    }


def _changes(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points where the value changed, with the first and the last: what the rules judge
    (when a value changed, how long it held) in a few points, so a reading of many GPUs stays
    small (a healthy GPU's counters: two points each)."""
    return [
        point for i, point in enumerate(points) if i in (0, len(points) - 1) or point[1] != points[i - 1][1]
    ]
