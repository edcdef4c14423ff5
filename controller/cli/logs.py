"""``logs NAMESPACE/JOB``: a run's launcher and worker logs through the API, merged by time.

Finds the attempt (``--attempt N``, the newest by default) with
``GET /api/v1/namespaces/{ns}/jobs/{name}/runs``, then prints every stored line of it from
``GET /api/v1/runs/{uid}/logs`` page by page, as ``TIME POD[rank N] TEXT`` (pods in colours on a
terminal, unless ``NO_COLOR`` is set); ``--grep`` keeps the lines an RE2 expression matches.
With ``--follow`` it then prints new lines as they are stored (the same endpoint's Server-Sent
Events) until interrupted. The API and the token are found as for ``wait``
(:mod:`controller.cli.apiclient`: ``--api-url``, ``--token``, ``--token-file``).

Exit status: 0 when the lines were printed, 1 when there is no such job or attempt, 3 when the
API refuses (the token, the caller's permissions, the request).
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Any, TextIO

import httpx
from httpx_sse import aconnect_sse

from controller.cli.apiclient import (
    ApiClient,
    ApiError,
    Refused,
    add_client_options,
    authorization,
    raise_for,
    tls_verification,
)
from controller.cli.waiting import EXIT_ERROR, EXIT_FAILED, EXIT_SUCCESS
from controller.contract.settings import ClientSettings

__all__ = ["add_parser", "print_logs", "render"]

PAGE = 500
_COLOURS = (31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96)


async def _run_uid(api: ApiClient, namespace: str, name: str, attempt: int | None) -> str | None:
    """The uid of the attempt (the newest: None), or None when there is none."""
    params = {"limit": "500"}
    while True:
        page = await api.get(f"/api/v1/namespaces/{namespace}/jobs/{name}/runs", params)
        for run in page["items"]:
            if attempt is None or run.get("attempt") == attempt:
                return str(run["uid"])
        if not page.get("next_cursor"):
            return None
        params["cursor"] = page["next_cursor"]


def render(entry: dict[str, Any], colour: bool) -> str:
    """One line as printed: ``TIME POD[rank N] TEXT``."""
    pod = str(entry.get("pod"))
    rank = f"[rank {entry['rank']}]" if entry.get("rank") is not None else ""
    label = f"{pod}{rank}"
    if colour:
        code = _COLOURS[zlib.crc32(pod.encode()) % len(_COLOURS)]
        label = f"\x1b[{code}m{label}\x1b[0m"
    return f"{entry.get('at')} {label} {entry.get('text')}"


async def print_logs(
    target: str,
    client: ClientSettings,
    *,
    attempt: int | None = None,
    grep: str | None = None,
    follow: bool = False,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Print the logs of ``target`` (``namespace/job``); the exit status."""
    namespace, _, name = target.partition("/")
    if not namespace or not name or "/" in name:
        print(f"logs: {target!r} is not NAMESPACE/JOB", file=err)
        return EXIT_ERROR
    colour = out.isatty() and "NO_COLOR" not in os.environ
    search = {"q": grep, "regex": "true"} if grep else {}
    async with ApiClient(client, timeout_s=60.0) as api:
        try:
            uid = await _run_uid(api, namespace, name, attempt)
            if uid is None:
                which = f"attempt {attempt}" if attempt is not None else "run"
                print(f"logs: no {which} of {namespace}/{name}", file=err)
                return EXIT_FAILED
            printed = await _pages(api, uid, search, colour, out)
            if follow:
                await _follow(client, uid, search, printed, colour, out)
        except ApiError as exc:
            print(f"logs: {exc}", file=err)
            return EXIT_ERROR
    return EXIT_SUCCESS


class _Printed:
    """The timestamp of the last line printed, and the lines printed with that very timestamp."""

    def __init__(self) -> None:
        self.at: str | None = None
        self.lines: set[tuple[str, str, str]] = set()

    def add(self, entry: dict[str, Any]) -> None:
        if entry["at"] != self.at:
            self.at, self.lines = entry["at"], set()
        self.lines.add((entry["pod"], entry["container"], entry["text"]))

    def new(self, entry: dict[str, Any]) -> bool:
        """Whether a followed line was not printed yet (timestamps of one format sort as text)."""
        if self.at is None or entry["at"] > self.at:
            return True
        return entry["at"] == self.at and (entry["pod"], entry["container"], entry["text"]) not in self.lines


async def _pages(api: ApiClient, uid: str, search: dict[str, str], colour: bool, out: TextIO) -> _Printed:
    """Print every stored line; what was printed last."""
    params = {"limit": str(PAGE), **search}
    printed = _Printed()
    while True:
        page = await api.get(f"/api/v1/runs/{uid}/logs", params)
        for entry in page["items"]:
            print(render(entry, colour), file=out)
            printed.add(entry)
        out.flush()
        if not page.get("next_cursor"):
            return printed
        params["cursor"] = page["next_cursor"]


async def _follow(
    client: ClientSettings,
    uid: str,
    search: dict[str, str],
    printed: _Printed,
    colour: bool,
    out: TextIO,
) -> None:
    """Print the lines stored from now on (those of the last printed timestamp once)."""
    params = {"follow": "true", **search}
    if printed.at is not None:
        params["since"] = printed.at
    url = f"{client.api_url.rstrip('/')}/api/v1/runs/{uid}/logs"
    timeout = httpx.Timeout(10.0, read=None)  # the API's heartbeats keep a quiet stream open
    async with (
        httpx.AsyncClient(timeout=timeout, verify=tls_verification(client)) as http,
        aconnect_sse(http, "GET", url, params=params, headers=authorization(client)) as source,
    ):
        if source.response.status_code != 200:
            await source.response.aread()
            raise_for(source.response)
        async for event in source.aiter_sse():
            if event.event == "denied":  # the caller lost the right to read the run's logs
                raise Refused(f"the API ended the follow: {json.loads(event.data).get('reason')}")
            if event.event != "line":
                continue
            entry = json.loads(event.data)
            if printed.new(entry):
                printed.add(entry)
                print(render(entry, colour), file=out, flush=True)


def add_parser(commands: Any) -> Any:
    """The ``logs`` subcommand's arguments (on ``commands``, an argparse subparsers action)."""
    parser = commands.add_parser(
        "logs",
        help="print a run's launcher and worker logs through the API, merged by time",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("target", metavar="NAMESPACE/JOB")
    parser.add_argument("--attempt", type=int, help="the attempt number (default: the newest)")
    parser.add_argument("--follow", "-f", action="store_true", help="then print new lines as they come")
    parser.add_argument("--grep", metavar="PATTERN", help="only lines this RE2 expression matches")
    add_client_options(parser)
    return parser
