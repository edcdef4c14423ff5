"""The filters the store's read queries share: each given value matched, a half-open time window."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select
from sqlalchemy.orm import QueryableAttribute

__all__ = ["matching", "within"]

Row = TypeVar("Row")


def matching(query: Select[Row], pairs: Iterable[tuple[QueryableAttribute[Any], object]]) -> Select[Row]:
    """``query`` narrowed to rows whose column equals its value, for each pair; a ``None`` value
    narrows nothing."""
    for column, value in pairs:
        if value is not None:
            query = query.where(column == value)
    return query


def within(
    query: Select[Row], column: QueryableAttribute[datetime], since: datetime | None, until: datetime | None
) -> Select[Row]:
    """``query`` narrowed to rows whose ``column`` lies in [``since``, ``until``); ``None`` leaves
    that end open."""
    if since is not None:
        query = query.where(column >= since)
    if until is not None:
        query = query.where(column < until)
    return query
