"""The roles (``watchers/``, ``consumers/``) reach NATS only through ``controller.bus`` and
PostgreSQL only through ``controller.store``: no import of ``nats``, ``asyncpg`` or SQLAlchemy's
statement builders, no NATS-only call (subscribing, pulling or fetching, asking JetStream for
info, acknowledging a message, writing to a key-value bucket) and no ``execute`` on a connection in
a role; nor a pull loop of
its own (``controller.bus.pulling`` is the door's tool: a role declares a
:class:`~controller.bus.consuming.Durable`, a share of one or a lane, and the door pulls and
acknowledges). Types and errors may be named
(``sqlalchemy.ext.asyncio``'s engine and connection, ``sqlalchemy.exc``; the NATS ones come from
``controller.bus.client``). The import-linter contracts forbid ``nats`` outside the bus; this
also catches the calls a role can make on a client object the bus handed it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROLES = ("watchers", "consumers")

FORBIDDEN_MODULES = ("nats", "asyncpg", "sqlalchemy")
DOOR_TOOLS = ("controller.bus.pulling",)
"""Modules of the bus that only its doors use."""
ALLOWED_MODULES = ("sqlalchemy.ext.asyncio", "sqlalchemy.exc")
"""Types and errors a role names; nothing in them writes SQL."""
NATS_CALLS = frozenset(
    {
        "subscribe",
        "pull_subscribe",
        "next_msg",
        "fetch",
        "pull",
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
KV_CALLS = frozenset({"put", "create", "update", "delete", "purge"})
"""Writes to a key-value bucket, on a receiver named for one (``kv``, ``bucket``); the bus writes
(:mod:`controller.bus.keyspace`, :mod:`controller.bus.buckets`)."""
SQL_CALLS = frozenset({"execute", "exec_driver_sql", "scalar", "scalars"})
CALLS = NATS_CALLS | SQL_CALLS

KNOWN: dict[str, set[str]] = {
    # The published-versions bucket of the watchers is written by the watcher itself (issue 39:
    # the watcher's identity logic to watchers/, the bucket I/O to bus/, in the watchers round).
    "watchers/published.py": {"kv.put"},
}
"""Exceptions, each with its reason."""


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
            if (top in FORBIDDEN_MODULES and not allowed) or module in DOOR_TOOLS:
                found.add(f"import {module}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in CALLS:
                found.add(node.func.attr)
            receiver = ast.unparse(node.func.value).lower()
            if node.func.attr in KV_CALLS and ("kv" in receiver or "bucket" in receiver):
                found.add(f"kv.{node.func.attr}")
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
from controller.bus.pulling import Puller
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.exc import IntegrityError

async def f(nc, conn, msg):
    await nc.subscribe("x")
    await conn.execute(text("SELECT 1"))
    await msg.ack()
    msgs = await puller.pull()
    await sub.fetch(10)
    await self._kv.put("key", b"value")
    await queue.put(1)
    await publisher.publish([])
"""
    assert corridors(source) == {
        "import nats",
        "import controller.bus.pulling",
        "import sqlalchemy",
        "subscribe",
        "execute",
        "ack",
        "pull",
        "fetch",
        "kv.put",
    }
