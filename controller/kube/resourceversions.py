"""Which of two resourceVersions of one resource is newer.

Kubernetes long defined a resourceVersion as an opaque string that clients compare for
equality only. KEP-5504 ("Comparable Resource Version", stable in Kubernetes 1.35) makes the
comparison part of the API: for objects of the same resource, a resourceVersion is a positive
decimal integer without leading zeros, and the larger one is the later change (client-go's
``CompareResourceVersion`` in ``k8s.io/apimachinery/pkg/util/resourceversion``). A server whose
versions do not have that form (an old aggregated API, say) answers ``None`` here, and the
watchers then never rely on the order.
"""

from __future__ import annotations

__all__ = ["comparable", "compare"]


def comparable(version: str | None) -> bool:
    """Whether ``version`` has the comparable form: a positive integer without leading zeros."""
    return version is not None and version.isascii() and version.isdigit() and version[:1] != "0"


def compare(a: str | None, b: str | None) -> int | None:
    """-1, 0 or 1 as ``a`` is older than, the same as or newer than ``b``; ``None`` when either is
    not comparable."""
    if a is None or b is None or not (comparable(a) and comparable(b)):
        return None
    if len(a) != len(b):
        return -1 if len(a) < len(b) else 1
    return (a > b) - (a < b)
