"""Schema migrations: ``alembic upgrade head`` from code, for the CLI and test fixtures."""

from __future__ import annotations

import asyncio
from importlib.resources import files

from alembic import command
from alembic.config import Config

MIGRATIONS = str(files("controller.store.migrations"))
"""The repository's ``migrations/``, installed as a package: found the same from a checkout or a wheel."""


def alembic_config(database_url: str) -> Config:
    """Alembic configuration pointing at the installed migrations and the given database."""
    config = Config()
    config.set_main_option("script_location", MIGRATIONS)
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade(database_url: str, revision: str = "head") -> None:
    """Bring the schema to ``revision``; safe to run on every start."""
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str) -> None:
    """Roll the schema back to ``revision``."""
    command.downgrade(alembic_config(database_url), revision)


async def upgrade_async(database_url: str) -> None:
    """:func:`upgrade` from inside a running event loop (env.py runs its own loop)."""
    await asyncio.to_thread(upgrade, database_url)
