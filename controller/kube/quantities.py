"""Kubernetes resource quantities (``500m``, ``16Gi``, ``4``) as exact numbers.

Parsed by the official client's ``kubernetes.utils.quantity.parse_quantity`` (every suffix the
API server accepts, decimal exponents included), so requests, limits and quotas compare as the
API server compares them; :func:`show` writes a number back in the form people read.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from kubernetes.utils.quantity import parse_quantity

__all__ = ["quantity", "show"]

_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity(value: object) -> Decimal:
    """``value`` (a quantity string or a number) as a Decimal; ``ValueError`` when it is not one."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"not a quantity: {value!r}")
    try:
        return Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]
    except (ValueError, InvalidOperation) as exc:
        raise ValueError(f"not a quantity: {value!r}") from exc


def show(resource: str, amount: Decimal) -> str:
    """``amount`` of ``resource`` as people write it: memory and storage in binary units (``64Gi``),
    fractions below one in thousandths (``500m``), others as decimals (``64.5``), whole numbers as
    they are."""
    if ("memory" in resource or "storage" in resource) and amount == amount.to_integral_value():
        for suffix, size in _BINARY:
            if amount >= size and amount % size == 0:
                return f"{amount // size:f}{suffix}"
    if amount != amount.to_integral_value():
        millis = amount * 1000
        if amount < 1 and millis == millis.to_integral_value():
            return f"{millis:.0f}m"
        return f"{amount.normalize():f}"
    return f"{amount:.0f}"
