"""A process imports the roles it runs and no more: the CLI loads no consumer until one runs,
and no service's client (SQLAlchemy, NATS, Kubernetes, the API's server) until a command that
uses it runs: ``--help``, completion and the API's client commands start without them.

Every Deployment starts ``python -m controller.cli <command>``; a watcher or a rules replica that
imported every consumer role (the audit chain, the dispatcher's HTTP and SMTP clients) took a
third of a second longer to start, which a restart pays before its first finding.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ROLE_MODULES = (
    "consumers.history",
    "consumers.rules.consumer",
    "consumers.audit",
    "consumers.notify.consumer",
    "consumers.notify.dispatch",
    "consumers.kube_events",
)


def _loaded_after(statement: str) -> set[str]:
    probe = f"import sys; {statement}; print(' '.join(m for m, loaded in sys.modules.items() if loaded))"
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True)
    return set(out.stdout.split())


def test_the_command_line_loads_no_consumer_role() -> None:
    loaded = _loaded_after("import controller.cli.commands")

    assert loaded.isdisjoint(ROLE_MODULES), sorted(loaded & set(ROLE_MODULES))


SERVICE_MODULES = (
    "sqlalchemy",
    "alembic",
    "nats",
    "kubernetes",
    "fastapi",
    "uvicorn",
    "controller.cli.runtime",
)


def test_the_command_line_loads_no_service_client_until_a_command_runs() -> None:
    loaded = _loaded_after("from controller.cli import commands; commands.parse(['runs', '-o', 'json'])")

    assert loaded.isdisjoint(SERVICE_MODULES), sorted(loaded & set(SERVICE_MODULES))


def test_a_role_is_loaded_when_it_is_attached() -> None:
    loaded = _loaded_after(
        "import importlib; from consumers.registry import CONSUMERS; "
        "importlib.import_module(CONSUMERS['rules'].module)"
    )

    assert "consumers.rules.consumer" in loaded
    assert loaded.isdisjoint(set(ROLE_MODULES) - {"consumers.rules.consumer"})


def test_a_command_reaches_nats_without_loading_its_websocket_transport() -> None:
    loaded = _loaded_after(
        "from controller.cli import commands; commands.without_websocket_transport(); "
        "import controller.cli.runtime; from nats.aio.transport import TcpTransport"
    )

    assert "nats.aio.client" in loaded
    assert "aiohttp" not in loaded


@pytest.mark.parametrize(
    ("argv", "dispatches"),
    [
        (["consume", "--only", "dispatch"], True),
        (["consume"], True),
        (["demo"], True),
        (["consume", "--only", "notify"], False),
        (["runs", "-o", "json"], False),
    ],
)
def test_only_a_command_that_dispatches_may_load_aiohttp(argv: list[str], dispatches: bool) -> None:
    from controller.cli import commands

    assert commands.sends_webhooks(commands.parse(argv)) is dispatches


def test_the_notify_consumer_runs_where_aiohttp_is_kept_out() -> None:
    loaded = _loaded_after(
        "from controller.cli import commands; commands.without_websocket_transport(); "
        "import importlib; from consumers.registry import CONSUMERS; "
        "importlib.import_module(CONSUMERS['notify'].module)"
    )

    assert "consumers.notify.consumer" in loaded
    assert "consumers.notify.dispatch" not in loaded


def test_the_watcher_loads_no_database_client() -> None:
    """``watch`` reaches NATS and Kubernetes only: SQLAlchemy and alembic (0.3 s of CPU) stay
    out of its start, which every restart of ``up`` pays before a failure can be seen."""
    loaded = _loaded_after(
        "from controller.cli import commands; commands.without_websocket_transport(); "
        "import controller.cli.runtime, watchers.service"
    )

    assert "watchers.service" in loaded
    assert loaded.isdisjoint({"sqlalchemy", "alembic", "asyncpg"}), sorted(loaded & {"sqlalchemy", "alembic"})


def test_history_and_rules_load_no_kubernetes_client() -> None:
    """The consumer roles on a failure's path write to the database and the bus only: the
    Kubernetes client (0.2 s of CPU) is imported by a role that asks for it."""
    loaded = _loaded_after(
        "from controller.cli import commands; commands.without_websocket_transport(); "
        "import importlib, controller.cli.runtime, consumers.service; from consumers.registry import CONSUMERS; "
        "[importlib.import_module(CONSUMERS[role].module) for role in ('history', 'rules')]"
    )

    assert {"consumers.history", "consumers.rules.consumer"} <= loaded
    assert loaded.isdisjoint({"kubernetes", "controller.kube.gateway"}), sorted(loaded & {"kubernetes"})


def test_a_process_that_does_not_migrate_loads_no_alembic() -> None:
    """The API and the consumers (``MPIJC_DATABASE__MIGRATE=false`` under ``up`` and in the
    Deployments) check the schema's revision against ``migrate.HEAD``: alembic (0.1 s of CPU)
    is loaded by what migrates."""
    loaded = _loaded_after(
        "from controller.cli import commands; commands.without_websocket_transport(); "
        "import controller.cli.runtime, consumers.service; from controller.store import migrate; migrate.HEAD"
    )

    assert "controller.store.migrate" in loaded
    assert "alembic" not in loaded
