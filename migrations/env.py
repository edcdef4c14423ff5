"""Alembic environment: runs migrations over the asyncpg engine of the history store.

The URL is the ``sqlalchemy.url`` set by the caller (:func:`controller.store.migrate.upgrade`),
else ``MPIJC_DATABASE__URL``.
"""

import asyncio
import os

from alembic import context
from sqlalchemy.engine import Connection

from controller.store.engine import make_engine
from controller.store.models import Base

config = context.config


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("MPIJC_DATABASE__URL")
    if not url:
        raise SystemExit("set MPIJC_DATABASE__URL to the PostgreSQL URL to migrate")
    return url


MIGRATION_LOCK = 7_424_821_019  # pg advisory lock key: replicas starting together migrate one at a time


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata, compare_type=True)
    with context.begin_transaction():
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        context.run_migrations()


async def _main() -> None:
    engine = make_engine(_url(), pool_size=1)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=Base.metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_main())
