"""What several revisions write alike: column types, a table's columns in rows, a check constraint's
swap, the runtime role.

Revisions import it as ``controller.store.migrations.shapes``. A revision is history: what is
here may grow, but what a revision already uses must keep the schema it made.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql

JSONB = postgresql.JSONB(astext_type=sa.Text())
"""A ``jsonb`` column's type."""
TS = sa.DateTime(timezone=True)
"""A ``timestamp with time zone`` column's type."""

_TYPES: dict[str, Callable[[], Any]] = {
    "text": sa.Text,
    "int": sa.Integer,
    "bigint": sa.BigInteger,
    "float": sa.Float,
    "bool": sa.Boolean,
    "jsonb": lambda: JSONB,
    "ts": lambda: TS,
}
_ROW = re.compile(r"(\w+) +(?:varchar\((\d+)\)|(\w+)) +(key|null|not null)(?: +(serial|no serial))?")


def columns(rows: str) -> list[sa.Column[Any]]:
    """The columns a table's ``rows`` declare, one a line: a name, a type (``varchar(N)``, ``text``,
    ``int``, ``bigint``, ``float``, ``bool``, ``jsonb``, ``ts``), then ``null``, ``not null`` or ``key``
    (the primary key), and ``serial`` or ``no serial`` where the revision says autoincrement."""
    found: list[sa.Column[Any]] = []
    for row in rows.strip().splitlines():
        match = _ROW.fullmatch(row.strip())
        if match is None:
            raise ValueError(f"not a column: {row!r}")
        name, length, kind, null, serial = match.groups()
        type_ = sa.String(length=int(length)) if length else _TYPES[kind]()
        said: dict[str, bool] = {"primary_key": True} if null == "key" else {"nullable": null == "null"}
        if serial:
            said["autoincrement"] = serial == "serial"
        found.append(sa.Column(name, type_, **said))
    return found


ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_$]{0,62}$")


def replace_check(name: str, table: str, column: str, values: Sequence[str]) -> None:
    """Drop the check constraint ``name`` of ``table`` and add it again: ``column`` is one of ``values``."""
    op.drop_constraint(name, table, type_="check")
    op.create_check_constraint(name, table, f"{column} IN ({', '.join(repr(v) for v in values)})")


def runtime_role() -> str:
    """The runtime role's name: set by :func:`controller.store.migrate.upgrade`, else the environment."""
    role = (
        context.config.get_main_option("mpijc_runtime_role")
        or os.environ.get("MPIJC_DATABASE__RUNTIME_ROLE")
        or "mpijc_runtime"
    )
    if not ROLE_NAME.match(role):
        raise SystemExit(f"MPIJC_DATABASE__RUNTIME_ROLE: {role!r} is not a plain lower-case role name")
    return role


def separate_role() -> str | None:
    """The runtime role to grant to, or None in single-role mode (the role migrating is the runtime role)."""
    current: str = op.get_bind().exec_driver_sql("SELECT current_user").scalar_one()
    single_role = context.config.get_main_option("mpijc_single_role") == "true"
    role = current if single_role else runtime_role()
    return None if role == current else role
