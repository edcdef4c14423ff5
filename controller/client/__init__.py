"""A Python client of the API, for notebooks, pipelines and the commands: the runs, their findings,
logs and comparisons, typed with the API's own models; sync (:class:`Client`) and async
(:class:`AsyncClient`). docs/client.md shows it in use.

    from controller.client import Client

    with Client() as api:
        for run in api.runs("team-a", phase="Failed").items:
            print(run.name, api.findings(run.uid)[0].root_cause)

Importing it loads httpx and pydantic, not the API's web framework, database or broker.
"""

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
from controller.contract.runs import (
    Comparison,
    Finding,
    LogEntry,
    RunDetail,
    RunPage,
    RunSummary,
)
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
