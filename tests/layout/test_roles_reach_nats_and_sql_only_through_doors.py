"""The roles (``watchers/``, ``consumers/``) reach NATS only through ``controller.bus`` and
PostgreSQL only through ``controller.store``: no import of ``nats``, ``asyncpg`` or SQLAlchemy's
statement builders, no NATS-only call (subscribing, asking JetStream for info, acknowledging a
message) and no ``execute`` on a connection in a role. Types and errors may be named
(``sqlalchemy.ext.asyncio``'s engine and connection, ``sqlalchemy.exc``; the NATS ones come from
``controller.bus.client``). The import-linter contracts forbid ``nats`` outside the bus; this
also catches the calls a role can make on a client object the bus handed it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("watchers", "consumers")

FORBIDDEN_MODULES = ("nats", "asyncpg", "sqlalchemy")
ALLOWED_MODULES = ("sqlalchemy.ext.asyncio", "sqlalchemy.exc")
"""Types and errors a role names; nothing in them writes SQL."""
NATS_CALLS = frozenset(
    {
        "subscribe",
        "pull_subscribe",
        "next_msg",
        "stream_info",
        "streams_info",
        "consumer_info",
        "consumers_info",
        "add_stream",
        "add_consumer",
        "key_value",
        "create_key_value",
        "ack",
        "ack_sync",
        "nak",
        "term",
        "in_progress",
    }
)
SQL_CALLS = frozenset({"execute", "exec_driver_sql", "scalar", "scalars"})
CALLS = NATS_CALLS | SQL_CALLS

KNOWN = {
    # The rules' partition loops pull and ack by themselves (issue 39: they become Durables with
    # an ownership filter in the rules round); listed here so that nothing else joins them.
    "consumers/rules/replica.py": {"ack"},
}


def corridors(source: str) -> set[str]:
    """What in ``source`` reaches NATS or SQL itself: ``import <module>`` and ``.<call>()``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            modules = []
        for module in modules:
            top = module.partition(".")[0]
            allowed = any(module == a or module.startswith(a + ".") for a in ALLOWED_MODULES)
            if top in FORBIDDEN_MODULES and not allowed:
                found.add(f"import {module}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CALLS:
            found.add(node.func.attr)
    return found


def test_roles_reach_nats_and_sql_only_through_their_doors() -> None:
    offences = {}
    for role in ROLES:
        for path in sorted((ROOT / role).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            extra = corridors(path.read_text()) - KNOWN.get(name, set())
            if extra:
                offences[name] = sorted(extra)
    assert offences == {}


def test_the_known_exceptions_still_need_their_place() -> None:
    """An exception that no longer offends is taken off the list (so it cannot come back quietly)."""
    for name, allowed in KNOWN.items():
        assert allowed <= corridors((ROOT / name).read_text()), name


def test_corridors_are_recognised() -> None:
    source = """
import nats
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.exc import IntegrityError

async def f(nc, conn, msg):
    await nc.subscribe("x")
    await conn.execute(text("SELECT 1"))
    await msg.ack()
    await publisher.publish([])
"""
    assert corridors(source) == {"import nats", "import sqlalchemy", "subscribe", "execute", "ack"}
