"""Schema migrations: ``alembic upgrade head`` from code, for the CLI and test fixtures.

Alembic is imported by what migrates or reads the migrations. A process that only checks that
someone migrated (``MPIJC_DATABASE__MIGRATE=false``: ``up``'s parts, the Deployments) compares
the database's revision with :data:`HEAD` and imports none of it: 0.1 s of CPU less at every
start of the API and of each consumer process.
"""

from __future__ import annotations

import asyncio
import functools
from importlib.resources import files
from typing import TYPE_CHECKING, Final

from sqlalchemy import text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = str(files("controller.store.migrations"))
"""The repository's ``migrations/``, installed as a package: found the same from a checkout or a wheel."""

HEAD: Final = "0017"
"""The newest revision of the installed migrations, as :func:`head_revision` reads it from them
(a test holds the two equal: a new migration moves this too)."""


def alembic_config(
    database_url: str, runtime_role: str | None = None, *, single_role: bool = False
) -> Config:
    """Alembic configuration pointing at the installed migrations and the given database.

    ``database_url`` is the **owner** role's (it will own the tables); ``runtime_role`` names
    the role the processes run as, which migration 0007 grants read-and-append on the audit
    table (unset: ``MPIJC_DATABASE__RUNTIME_ROLE``, else ``mpijc_runtime``). ``single_role``:
    the role migrating is also the runtime role (no owner URL configured): nothing is granted.
    """
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    if runtime_role:
        config.set_main_option("mpijc_runtime_role", runtime_role)
    if single_role:
        config.set_main_option("mpijc_single_role", "true")
    return config


def upgrade(
    database_url: str, revision: str = "head", runtime_role: str | None = None, *, single_role: bool = False
) -> None:
    """Bring the schema to ``revision``; safe to run on every start."""
    from alembic import command

    command.upgrade(alembic_config(database_url, runtime_role, single_role=single_role), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Roll the schema back to ``revision``."""
    from alembic import command

    command.downgrade(alembic_config(database_url), revision)


async def upgrade_async(
    database_url: str, runtime_role: str | None = None, *, single_role: bool = False
) -> None:
    """:func:`upgrade` from inside a running event loop (env.py runs its own loop)."""
    await asyncio.to_thread(
        functools.partial(upgrade, database_url, "head", runtime_role, single_role=single_role)
    )


def head_revision() -> str | None:
    """The newest revision the installed migrations know (read from them: :data:`HEAD` without alembic)."""
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("postgresql://unused")).get_current_head()


async def current_revision(conn: AsyncConnection) -> str | None:
    """The revision the database's schema is at (None: never migrated)."""
    try:
        async with conn.begin_nested():
            return (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar_one_or_none()
    except ProgrammingError:
        return None
