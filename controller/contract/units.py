"""Amounts as people read them in findings and comparisons."""

from __future__ import annotations

__all__ = ["GIB", "gib"]

GIB = 1024**3


def gib(amount: float) -> str:
    """Bytes in GiB with one decimal: ``15.8 GiB``."""
    return f"{amount / GIB:.1f} GiB"
