"""DCGM's blank sentinels are not readings: a counter the GPU does not support, exported as
``9223372036854775794`` (``DCGM_FT_INT64_BLANK + 2``, as dcgm-exporter's README shows it) one
step and ``0`` the next, is no rise of 9.2e18 errors and raises no gpu-fault; the node's name is
read from ``Hostname`` (older dcgm-exporter) or ``hostname`` (newer)."""

from __future__ import annotations

import pytest

from consumers.rules.gpuhealth import faults_of
from controller.contract.events import GpuHealth
from controller.prometheus import Series
from controller.testing.events import at
from watchers.dcgm import health_points, is_blank

BLANK_INT64 = float("9223372036854775794")


@pytest.mark.parametrize(
    ("value", "blank"),
    [
        (BLANK_INT64, True),
        (2147483634.0, True),  # DCGM_FT_INT32_BLANK + 2
        (140737488355330.0, True),  # DCGM_FT_FP64_BLANK + 2
        (0.0, False),
        (79.0, False),
        (2147483631.0, False),
        (1.5e12, False),  # a large but real counter
    ],
)
def test_blank_sentinels_are_told_from_values(value: float, blank: bool) -> None:
    assert is_blank(value) is blank


def test_a_counter_flickering_between_blank_and_zero_is_no_fault() -> None:
    t0 = at(0).timestamp()
    flicker = tuple((t0 + 60 * i, BLANK_INT64 if i % 2 else 0.0) for i in range(6))
    labels = {"__name__": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gpu": "0", "hostname": "gpu-node-1"}
    xid = {"__name__": "DCGM_FI_DEV_XID_ERRORS", "gpu": "0", "Hostname": "gpu-node-1"}

    points = health_points([Series(labels, flicker), Series(xid, flicker)], t0, t0 + 600)

    where, fields = points["0"]
    assert where["hostname"] == "gpu-node-1"
    assert [v for _, v in fields["ecc_dbe"]] == [0.0, 0.0]
    assert [v for _, v in fields["xid"]] == [0.0, 0.0]
    curve = tuple((at(i), v) for i, (_, v) in enumerate(flicker))  # the flicker, had it been kept
    assert faults_of(GpuHealth(ecc_dbe=curve)) != []  # what the filter spares the rules
