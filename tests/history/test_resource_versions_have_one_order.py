"""resourceVersions have one order (KEP-5504's comparable form, the larger the later): the number
the store keeps, the watch's comparison and the corroboration's test of comparability agree, and a
version not in that form neither crashes nor orders after a real one."""

from __future__ import annotations

import pytest

from controller.contract.kubeflow import comparable, compare, resource_version_order

ORDERED = ["1", "9", "10", "99", "100", "123456789", "9223372036854775807"]


@pytest.mark.parametrize("older", range(len(ORDERED) - 1), ids=lambda i: ORDERED[i])
def test_the_number_and_the_comparison_agree(older: int) -> None:
    a, b = ORDERED[older], ORDERED[older + 1]
    assert resource_version_order(a) < resource_version_order(b)
    assert compare(a, b) == -1
    assert compare(b, a) == 1
    assert compare(a, a) == 0


@pytest.mark.parametrize("version", ["", "0", "007", "12a", "-3", "²", "١٢"], ids=repr)
def test_a_version_not_in_the_comparable_form_orders_first_and_is_not_compared(version: str) -> None:
    assert not comparable(version)
    assert resource_version_order(version) == 0
    assert compare(version, "5") is None
