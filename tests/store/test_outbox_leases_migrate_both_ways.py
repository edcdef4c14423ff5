"""Migration 0017 (outbox leases) round-trips: downgraded, a lease still running moves back into
``next_attempt_at`` (where the code before it kept leases), so the row is not sent twice; the
outbox table leaves room on its pages for HOT updates, and no longer once downgraded."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.store import migrate

NOW = datetime.now(UTC).replace(microsecond=0)


async def test_a_running_lease_survives_the_downgrade(database_url: str, engine: AsyncEngine) -> None:
    await engine.dispose()
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT reloptions FROM pg_class WHERE relname = 'deliveries'") == [
            "fillfactor=50"
        ]
        await conn.execute(
            "INSERT INTO subscriptions (id, channel, state, event_types, rules, severities, recipients,"
            " one_shot, description, created_by, created_at, updated_at)"
            " VALUES ('sub_a', 'webhook', 'active', '[]', '[]', '[]', '[]', false, '', 'me', $1, $1)",
            NOW,
        )
        for seq, lease in ((1, NOW + timedelta(minutes=2)), (2, None), (3, NOW - timedelta(minutes=1))):
            await conn.execute(
                "INSERT INTO deliveries (seq, id, subscription_id, channel, event_type, order_key,"
                " namespace, job_name, job_uid, body, status, attempts, next_attempt_at, leased_until,"
                " event_at, created_at) VALUES ($1, $2, 'sub_a', 'webhook', 'job.created', $5, 'ns',"
                " 'j', 'uid', '{}', 'pending', 0, $3, $4, $3, $3)",
                seq,
                f"msg_{seq}",
                NOW,
                lease,
                f"job-{seq}",
            )
    finally:
        await conn.close()

    await asyncio.to_thread(migrate.downgrade, database_url, "0016")
    conn = await asyncpg.connect(database_url)
    try:
        due = dict(await conn.fetch("SELECT seq, next_attempt_at FROM deliveries"))
        assert due == {1: NOW + timedelta(minutes=2), 2: NOW, 3: NOW}
        assert await conn.fetchval("SELECT reloptions FROM pg_class WHERE relname = 'deliveries'") is None
    finally:
        await conn.close()

    await migrate.upgrade_async(database_url)
    conn = await asyncpg.connect(database_url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM deliveries WHERE leased_until IS NULL") == 3
    finally:
        await conn.close()
