"""A Python client of the API, for notebooks, pipelines and the commands: the runs, their findings,
logs and comparisons, typed with the API's own models; sync (:class:`Client`) and async
(:class:`AsyncClient`). docs/client.md shows it in use.

    from controller.client import Client

    with Client() as api:
        for run in api.runs("team-a", phase="Failed").items:
            print(run.name, api.findings(run.uid)[0].root_cause)

Importing it loads httpx and pydantic, not the API's web framework, database or broker. The names
below are loaded when first used, so a command that needs only the errors (every command's
``--help``) does not build the models.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controller.client.aio import AsyncClient, Goal, client_settings
    from controller.client.errors import (
        ClientError,
        Exit,
        NotFound,
        Refused,
        RunFailed,
        TimedOut,
        Unreachable,
        UsageError,
    )
    from controller.client.refs import RunRef
    from controller.client.sync import Client
    from controller.contract.runs import Comparison, Finding, LogEntry, RunDetail, RunPage, RunSummary
    from controller.contract.settings import ClientSettings

__all__ = [
    "AsyncClient",
    "Client",
    "ClientError",
    "ClientSettings",
    "Comparison",
    "Exit",
    "Finding",
    "Goal",
    "LogEntry",
    "NotFound",
    "Refused",
    "RunDetail",
    "RunFailed",
    "RunPage",
    "RunRef",
    "RunSummary",
    "TimedOut",
    "Unreachable",
    "UsageError",
    "client_settings",
]

_HOME = {
    "AsyncClient": "controller.client.aio",
    "Goal": "controller.client.aio",
    "client_settings": "controller.client.aio",
    "Client": "controller.client.sync",
    "RunRef": "controller.client.refs",
    "ClientSettings": "controller.contract.settings",
    **dict.fromkeys(
        ("ClientError", "Exit", "NotFound", "Refused", "RunFailed", "TimedOut", "Unreachable", "UsageError"),
        "controller.client.errors",
    ),
    **dict.fromkeys(
        ("Comparison", "Finding", "LogEntry", "RunDetail", "RunPage", "RunSummary"),
        "controller.contract.runs",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(__all__)
