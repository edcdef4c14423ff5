"""Many rows or values in one statement: ``INSERT … SELECT * FROM unnest(<one array per column>)``,
and ``column = ANY(<one array>)``.

SQLAlchemy's ``executemany`` turns a batch into one parameter dict and one Bind/Execute per
row (asyncpg); this shape sends one array per column instead, so a batch of any size costs
one round trip, one execution of one prepared statement, and no per-row work in SQLAlchemy.
The array types come from the table's own column types (lengths dropped: a cast to
``varchar(n)`` would truncate where the column refuses). JSON and JSONB columns take JSON
text (serialize it once, with pydantic-core, as :mod:`controller.store.engine` does) and
PostgreSQL parses it. Rows are inserted in the order given, so callers that need a lock
order sort them; an ``ON CONFLICT … DO UPDATE`` must not see one key twice in a batch.

For the same reason a hot path filters by a set of values with :func:`among` rather than
``in_``: ``IN (…)`` renders one bind parameter per value, so every batch size is a statement
of its own, prepared (a round trip) and planned anew.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, String, Table, TextClause, any_, bindparam, text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import CursorResult
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.orm import DeclarativeBase, QueryableAttribute
from sqlalchemy.types import JSON

__all__ = ["UnnestInsert", "among", "unnest_insert"]

_DIALECT = postgresql.dialect()  # type: ignore[no-untyped-call]
_LENGTH = re.compile(r"\(\d+(?:,\s*\d+)?\)")


@dataclass(frozen=True)
class UnnestInsert:
    """One prepared ``INSERT … SELECT * FROM unnest(…)`` and the columns its arrays hold."""

    columns: tuple[str, ...]
    statement: TextClause

    async def execute(self, conn: AsyncConnection, rows: Sequence[Mapping[str, Any]]) -> CursorResult[Any]:
        """Insert ``rows`` (each with every column; JSON columns as JSON text), in their order."""
        return await conn.execute(self.statement, {c: [row[c] for row in rows] for c in self.columns})


def unnest_insert(model: type[DeclarativeBase], columns: Iterable[str], tail: str = "") -> UnnestInsert:
    """``INSERT INTO <model's table> (columns) SELECT * FROM unnest(…) <tail>``; ``tail`` holds the
    ``ON CONFLICT`` and ``RETURNING`` clauses (they refer to the target table by its name)."""
    table = model.__table__
    assert isinstance(table, Table)
    names = tuple(columns)
    quote = _DIALECT.identifier_preparer.quote
    arrays = ", ".join(_array(c, table.c[c].type) for c in names)
    sql = f"INSERT INTO {quote(table.name)} ({', '.join(map(quote, names))}) SELECT * FROM unnest({arrays})"
    return UnnestInsert(names, text(f"{sql} {tail}".strip()))


def _array(name: str, sqltype: Any) -> str:
    """The bind parameter ``:name`` cast to an array of the column's type."""
    element = _LENGTH.sub("", sqltype.compile(dialect=_DIALECT))
    if isinstance(sqltype, JSON):  # JSON text in, parsed by PostgreSQL
        return f"CAST(CAST(:{name} AS text[]) AS {element}[])"
    return f"CAST(:{name} AS {element}[])"


def among(column: QueryableAttribute[Any], values: Iterable[Any]) -> ColumnElement[bool]:
    """``column = ANY(:values)``: one statement whatever the number of values (sorted, so rows
    are locked in key order); strings as ``varchar[]`` without a length (a cast would truncate)."""
    element = String() if isinstance(column.type, String) else column.type
    return column == any_(bindparam(None, sorted(values), type_=ARRAY(element)))
