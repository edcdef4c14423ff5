"""The Alembic history has one head, matches the models, and round-trips with data in it."""

from __future__ import annotations

import asyncio

import asyncpg
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.store import migrate
from controller.store.history import apply_events
from controller.store.models import Base
from controller.testing.stories import oom_story
from watchers.correlating import Correlator


def test_single_head() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config("postgresql://unused/unused"))
    assert len(script.get_heads()) == 1


def test_the_head_a_process_checks_is_the_migrations_head() -> None:
    """A process that does not migrate checks the database against ``migrate.HEAD`` (without
    alembic): a new migration must move it."""
    assert migrate.head_revision() == migrate.HEAD


async def test_models_and_migrations_agree(engine: AsyncEngine) -> None:
    def diff(conn: Connection) -> list[object]:
        return list(compare_metadata(MigrationContext.configure(conn), Base.metadata))

    async with engine.connect() as conn:
        assert await conn.run_sync(diff) == []


async def test_downgrade_and_upgrade_keep_the_history(database_url: str, engine: AsyncEngine) -> None:
    correlator = Correlator(30, lambda: 0.0)
    events = [e for o in oom_story() for e in correlator.observe(o)]
    async with engine.begin() as conn:
        await apply_events(conn, events)
    await engine.dispose()

    await asyncio.to_thread(migrate.downgrade, database_url, "0001")
    await migrate.upgrade_async(database_url)

    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT phase FROM runs") == "Failed"
        assert await conn.fetchval("SELECT count(*) FROM findings") == 0
    finally:
        await conn.close()
