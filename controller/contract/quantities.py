"""Kubernetes resource quantities (``500m``, ``16Gi``, ``4``, ``1e3``) as exact, bounded numbers.

The one quantity parser of the project: the admission webhook's quota check, the usage probe
and the ``quota`` rule all read quantities here. It follows the API server's grammar
(``k8s.io/apimachinery`` ``resource.Quantity``)::

    <quantity> ::= <signed number> <suffix>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei            (binary)
                 | n | u | m | "" | k | M | G | T | P | E  (decimal)
                 | e <signed integer> | E <signed integer> (decimal exponent)

and, as the API server does, it caps what it reads: a magnitude over 2^63 - 1 is read as
2^63 - 1 and a non-zero magnitude under one nano as one nano (rounded away from zero). So a
hostile ``1e9999999`` is a very large number (which no quota fits), not a Decimal whose
exponent makes every later sum raise, and the work is bounded by the text: at most
:data:`MAX_CHARS` characters, exponents of at most :data:`MAX_EXPONENT_DIGITS` digits, never a
power computed from the text. The official client's ``parse_quantity`` has no such bound
(``Decimal("1e9999999") * 4`` raises ``Overflow``), which is why it is not used.

:func:`show` writes a number back in the form people read.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext
from typing import Final

__all__ = ["LARGEST", "MAX_CHARS", "SMALLEST", "quantity", "show"]

MAX_CHARS: Final = 64
"""Longest quantity text read (``9223372036854775807`` is 19 digits); longer is not a quantity."""
MAX_EXPONENT_DIGITS: Final = 18
"""Digits of a decimal exponent read (its value is compared, never raised to); more is not a quantity."""
LARGEST: Final = Decimal(2**63 - 1)
"""The largest magnitude the API server represents; larger ones are read as it."""
SMALLEST: Final = Decimal("1e-9")
"""The smallest non-zero magnitude (one nano); smaller ones are rounded up to it."""

_GRAMMAR: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<number>[0-9]{1,63}(?:\.[0-9]{0,63})?|\.[0-9]{1,63})"
    rf"(?:(?P<suffix>[KMGTPE]i|[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]{{1,{MAX_EXPONENT_DIGITS}}}))?"
)
_SCALE: Final[dict[str, Decimal]] = {
    "": Decimal(1),
    **{s: Decimal(10) ** e for s, e in (("n", -9), ("u", -6), ("m", -3))},
    **{s: Decimal(1000) ** (i + 1) for i, s in enumerate("kMGTPE")},
    **{f"{s}i": Decimal(1024) ** (i + 1) for i, s in enumerate("KMGTPE")},
}
_HEADROOM: Final = 24
"""Powers of ten past which a number is capped without computing it (2^63 is about 1e19)."""
_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity(value: object) -> Decimal:
    """``value`` (a quantity string, an int or a finite float) as a Decimal within
    [-:data:`LARGEST`, :data:`LARGEST`] (see the module); ``ValueError`` when it is not one."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"not a quantity: {_shown(value)}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a quantity: {value!r}")
        return _bounded(Decimal(repr(value)))
    if isinstance(value, int):
        return _bounded(Decimal(max(min(value, 2**63), -(2**63))))
    match = _GRAMMAR.fullmatch(value) if len(value) <= MAX_CHARS else None
    if match is None:
        raise ValueError(f"not a quantity: {_shown(value)}")
    number = Decimal(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if not number:
            number = Decimal(0)
        elif number.adjusted() + exponent > _HEADROOM:
            number = LARGEST
        elif number.adjusted() + exponent < -_HEADROOM:
            number = SMALLEST
        else:
            number = number.scaleb(exponent)
    else:
        number *= _SCALE[match["suffix"] or ""]
    return _bounded(-number if match["sign"] == "-" else number)


def _bounded(number: Decimal) -> Decimal:
    """``number`` with its magnitude capped at :data:`LARGEST` and raised to :data:`SMALLEST`."""
    if abs(number) > LARGEST:
        return LARGEST.copy_sign(number)
    if number and abs(number) < SMALLEST:
        return SMALLEST.copy_sign(number)
    return number


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= MAX_CHARS else f"{text[:MAX_CHARS]}…"


def show(resource: str, amount: Decimal) -> str:
    """``amount`` of ``resource`` as people write it: memory and storage in binary units (``64Gi``),
    fractions below one in thousandths (``500m``), others as decimals (``64.5``), whole numbers as
    they are."""
    with localcontext() as context:
        context.prec = 60  # sums of capped quantities stay exact (2^63 x 2^31 replicas: 29 digits)
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
