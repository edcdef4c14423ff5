"""Several replicas starting at once migrate one at a time: every upgrade succeeds, one schema results."""

from __future__ import annotations

import subprocess
import sys

import asyncpg


async def test_concurrent_upgrades_from_separate_processes_serialize(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        await conn.close()

    code = f"from controller.store import migrate; migrate.upgrade({database_url!r})"
    replicas = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE) for _ in range(4)]
    errors = [replica.communicate(timeout=60)[1].decode() for replica in replicas]
    assert [replica.returncode for replica in replicas] == [0, 0, 0, 0], errors

    conn = await asyncpg.connect(database_url)
    try:
        versions = await conn.fetch("SELECT version_num FROM alembic_version")
        tables = {
            r["tablename"]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname='public'")
        }
    finally:
        await conn.close()
    assert len(versions) == 1
    assert {"runs", "pods", "pod_states", "timeline", "findings"} <= tables
