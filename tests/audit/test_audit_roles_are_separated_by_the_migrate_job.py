"""The migrate command runs as a non-superuser owner role and grants the runtime role; runtime
processes with ``MPIJC_DATABASE__MIGRATE=false`` never migrate and refuse a schema not at head."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from sqlalchemy import make_url

from controller.testing.processes import run_cli
from tests.audit_helpers import connected
from tests.conftest import Services

# one worker runs them all: their roles belong to the server, not to one database
pytestmark = pytest.mark.xdist_group("test_audit_roles_are_separated_by_the_migrate_job")

OWNER, RUNTIME = "mpijc_test_owner", "mpijc_test_runtime"
PASSWORD = "mpijc-test-password"


def _url(admin_url: str, database: str, user: str | None = None) -> str:
    url = make_url(admin_url).set(database=database)
    if user is not None:
        url = url.set(username=user, password=PASSWORD)
    return url.render_as_string(hide_password=False)


@pytest.fixture
async def empty_database(services: Services) -> AsyncIterator[str]:
    """A database never migrated, owned by a non-superuser owner role that may create roles."""
    name = f"r_{uuid.uuid4().hex[:12]}"
    async with connected(services.postgres_admin_url) as admin:
        for role, extra in ((OWNER, " CREATEROLE"), (RUNTIME, "")):
            if not await admin.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role):
                await admin.execute(f"CREATE ROLE {role}")
            await admin.execute(f"ALTER ROLE {role} LOGIN{extra} PASSWORD '{PASSWORD}'")
        await admin.execute(f"CREATE DATABASE {name} OWNER {OWNER}")
        yield name
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MPIJC_")}
    return run_cli(args, {**clean, "MPIJC_STARTUP_TIMEOUT_S": "2", **env})


async def test_the_migrate_job_owns_the_schema_and_the_runtime_role_only_appends(
    services: Services, empty_database: str
) -> None:
    admin_url = services.postgres_admin_url
    owner_url = _url(admin_url, empty_database, OWNER)
    runtime_url = _url(admin_url, empty_database, RUNTIME)
    runtime_env = {"MPIJC_DATABASE__URL": runtime_url, "MPIJC_DATABASE__MIGRATE": "false"}

    refused = cli("audit", "verify", **runtime_env)
    assert refused.returncode == 2
    line = refused.stderr.strip().splitlines()[-1]  # after the "waiting for the migrate Job" log lines
    assert "MPIJC_DATABASE__MIGRATE=false" in line and "is at revision none" in line
    assert "run the migrate Job" in line

    for _ in range(2):  # idempotent: the second run finds the schema at head
        migrated = cli(
            "migrate",
            MPIJC_DATABASE__OWNER_URL=owner_url,
            MPIJC_DATABASE__RUNTIME_ROLE=RUNTIME,
            MPIJC_DATABASE__MIGRATE="false",
        )
        assert migrated.returncode == 0, migrated.stderr
        assert "schema is at head" in migrated.stdout

    async with connected(_url(admin_url, empty_database)) as admin:
        owners = await admin.fetch("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")
        assert [row["tableowner"] for row in owners] == [OWNER]

    verified = cli("audit", "verify", **runtime_env)
    assert verified.returncode == 0, verified.stderr
    assert "the audit chain is empty" in verified.stdout

    async with connected(runtime_url) as runtime:
        await runtime.execute("INSERT INTO audit_export_cursors VALUES ('s', 0, 0, now())")
        for statement in (
            "DELETE FROM audit_records",
            "TRUNCATE audit_records",
            "ALTER TABLE audit_records DISABLE TRIGGER ALL",
            "UPDATE alembic_version SET version_num = '0001'",
            "CREATE TABLE public.x (a int)",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await runtime.execute(statement)


async def test_without_the_owner_url_migrating_refuses_unless_single_role_is_asked_for(
    services: Services, empty_database: str
) -> None:
    admin_url = services.postgres_admin_url
    owner_url = _url(admin_url, empty_database, OWNER)

    refused = cli("migrate", MPIJC_DATABASE__URL=owner_url)  # the Job, its owner Secret missing
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "MPIJC_DATABASE__OWNER_URL is unset" in line and "MPIJC_DATABASE__SINGLE_ROLE=true" in line
    async with connected(_url(admin_url, empty_database)) as admin:
        assert await admin.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") == 0

        single = cli("migrate", MPIJC_DATABASE__URL=owner_url, MPIJC_DATABASE__SINGLE_ROLE="true")
        assert single.returncode == 0, single.stderr
        assert "single-role mode" in single.stderr and "could rewrite it" in single.stderr
        owners = await admin.fetch("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")
        assert [row["tableowner"] for row in owners] == [OWNER]


async def test_a_runtime_url_naming_the_owner_or_a_superuser_is_refused_unless_single_role(
    services: Services, empty_database: str
) -> None:
    admin_url = services.postgres_admin_url
    owner_url = _url(admin_url, empty_database, OWNER)
    migrated = cli("migrate", MPIJC_DATABASE__OWNER_URL=owner_url, MPIJC_DATABASE__RUNTIME_ROLE=RUNTIME)
    assert migrated.returncode == 0, migrated.stderr

    as_owner = cli("audit", "verify", MPIJC_DATABASE__URL=owner_url, MPIJC_DATABASE__MIGRATE="false")
    assert as_owner.returncode == 2, as_owner.stdout
    (line,) = as_owner.stderr.strip().splitlines()
    assert line.startswith(
        "mpijob-controller audit: MPIJC_DATABASE__URL: role 'mpijc_test_owner' owns the schema's tables "
        "(audit_records"
    )
    assert "MPIJC_DATABASE__SINGLE_ROLE=true" in line

    superuser = cli(
        "audit",
        "verify",
        MPIJC_DATABASE__URL=_url(admin_url, empty_database),
        MPIJC_DATABASE__MIGRATE="false",
    )
    assert superuser.returncode == 2, superuser.stdout
    assert "is a superuser" in superuser.stderr and "MPIJC_DATABASE__URL" in superuser.stderr

    told = cli(
        "audit",
        "verify",
        MPIJC_DATABASE__URL=owner_url,
        MPIJC_DATABASE__MIGRATE="false",
        MPIJC_DATABASE__SINGLE_ROLE="true",
    )
    assert told.returncode == 0, told.stderr
    assert (
        "owns the schema's tables" in told.stderr and "could alter or rewrite the audit chain" in told.stderr
    )

    runtime_env = {
        "MPIJC_DATABASE__URL": _url(admin_url, empty_database, RUNTIME),
        "MPIJC_DATABASE__MIGRATE": "false",
    }
    as_runtime = cli("audit", "verify", **runtime_env)
    assert as_runtime.returncode == 0, as_runtime.stderr
    assert "MPIJC_DATABASE__URL" not in as_runtime.stderr
