"""What the role a process connects as may do to the schema: the runtime role must not own it.

Migrations run as the owner role and grant the runtime role what the processes need, on the
audit table only ``SELECT`` and ``INSERT`` (migration 0006). That separation holds only if the
processes really connect as the runtime role: a ``MPIJC_DATABASE__URL`` naming the owner (or a
superuser) runs just as well, and then a compromised process could alter, rewrite or truncate
the audit chain. :func:`role_powers` asks PostgreSQL what the connected role is; the CLI refuses
to start on an owner or superuser unless single-role mode was asked for.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["RolePowers", "role_powers"]

_POWERS = text(
    """
    SELECT current_user AS role,
           coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false) AS superuser,
           ARRAY(SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
                   AND pg_has_role(current_user, c.relowner, 'MEMBER')
                 ORDER BY c.relname = 'audit_records' DESC, c.relname LIMIT :shown) AS owned
    """
)
_SHOWN = 3
"""Owned tables named in a message; one is enough to prove the point."""


@dataclass(frozen=True)
class RolePowers:
    """The connected role, whether it is a superuser, and (some of) the schema's tables it owns,
    directly or as a member of their owner: owning a table is what ALTER, DROP and TRUNCATE need."""

    role: str
    superuser: bool
    owned: tuple[str, ...]

    @property
    def can_alter_schema(self) -> bool:
        """Whether this role could change or empty the tables, the audit chain's included."""
        return self.superuser or bool(self.owned)

    def describe(self) -> str:
        """What makes it more than a runtime role, in a few words."""
        if self.superuser:
            return f"role {self.role!r} is a superuser"
        return f"role {self.role!r} owns the schema's tables ({', '.join(self.owned)})"


async def role_powers(conn: AsyncConnection) -> RolePowers:
    """What the role of ``conn`` may do to the tables of its schema (``current_schema()``)."""
    row = (await conn.execute(_POWERS, {"shown": _SHOWN})).one()
    return RolePowers(row.role, bool(row.superuser), tuple(row.owned))
