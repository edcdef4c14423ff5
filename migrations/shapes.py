"""What several revisions write alike: column types, a check constraint's swap, the runtime role.

Revisions import it as ``controller.store.migrations.shapes``. A revision is history: what is
here may grow, but what a revision already uses must keep the schema it made.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import context, op
from sqlalchemy.dialects import postgresql

JSONB = postgresql.JSONB(astext_type=sa.Text())
"""A ``jsonb`` column's type."""
TS = sa.DateTime(timezone=True)
"""A ``timestamp with time zone`` column's type."""

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
