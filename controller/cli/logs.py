"""``logs NAMESPACE/JOB``: a run's launcher and worker logs through the API, merged by time.

Finds the attempt (``--attempt N``, the newest by default) as ``wait`` does
(:func:`controller.cli.browsing.find_attempt`), then prints every stored line of it from
``GET /api/v1/runs/{uid}/logs`` page by page, as ``TIME POD[rank N] TEXT`` (UTC, to the
millisecond; pods in colours on a terminal, unless ``NO_COLOR`` is set); ``--grep`` keeps the
lines an RE2 expression matches (``-i``: ignoring case), ``--since``/``--until`` those of a time
window. With ``--follow`` it then prints new lines as they are stored (the same endpoint's
Server-Sent Events, resumed with ``Last-Event-ID`` after a lost connection:
:meth:`controller.cli.apiclient.ApiClient.events`) until interrupted. ``-o json`` prints each line
as the API gives it, one JSON object a line (JSON Lines); ``-o yaml``, as the items of one YAML list.
An attempt with no stored line (or none matching) says so in one line on stderr, and exits 0. The
API and the token are found as for ``wait`` (:mod:`controller.cli.apiclient`).

Exit statuses are :mod:`controller.cli.exits`': 0 printed, 4 no such job or attempt, 3 the API
refused (the token, the caller's permissions, the expression).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import zlib
from collections.abc import Callable
from typing import Any, TextIO

from controller.cli import grammar, rendering
from controller.cli.apiclient import ApiClient, NotFound, add_client_options
from controller.cli.browsing import find_attempt, job_ref, job_target, not_found
from controller.cli.exits import Exit
from controller.contract.settings import ClientSettings

__all__ = ["add_parser", "print_logs", "render"]

PAGE = 500
_COLOURS = (31, 32, 33, 34, 35, 36, 91, 92, 93, 94, 95, 96)


def render(entry: dict[str, Any], colour: bool) -> str:
    """One line as printed: ``TIME POD[rank N] TEXT``."""
    pod = str(entry.get("pod"))
    rank = f"[rank {entry['rank']}]" if entry.get("rank") is not None else ""
    label = f"{pod}{rank}"
    if colour:
        code = _COLOURS[zlib.crc32(pod.encode()) % len(_COLOURS)]
        label = f"\x1b[{code}m{label}\x1b[0m"
    return f"{rendering.when(entry.get('at'), millis=True)} {label} {entry.get('text')}"


async def print_logs(
    target: str | tuple[str, str],
    client: ClientSettings,
    *,
    attempt: int | None = None,
    grep: str | None = None,
    ignore_case: bool = False,
    since: str | None = None,
    until: str | None = None,
    follow: bool = False,
    output: str = "table",
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> Exit:
    """Print the logs of ``target`` (``namespace/job``); the exit status. The API's refusals are
    raised (:class:`~controller.cli.apiclient.ApiError`); a malformed target, ValueError."""
    out, err = out or sys.stdout, err or sys.stderr
    namespace, name = job_ref(target) if isinstance(target, str) else target
    colour = out.isatty() and "NO_COLOR" not in os.environ
    show = _shown(output, colour)
    search = {"q": f"(?i:{grep})" if ignore_case else grep, "regex": "true"} if grep else {}
    search.update({key: value for key, value in (("since", since), ("until", until)) if value})
    async with ApiClient(client, timeout_s=60.0) as api:
        run = await find_attempt(api, namespace, name, attempt)
        if run is None:
            raise NotFound(not_found(namespace, name, attempt))
        uid = str(run["uid"])
        printed = await _pages(api, uid, search, show, out)
        if printed.at is None:
            which = " matching --grep, --since or --until" if search else ""
            then = "; following new ones" if follow else ""
            print(
                f"logs: no lines{which} are stored for {namespace}/{name} attempt {run['attempt']}{then}",
                file=err,
                flush=True,
            )
        if follow:
            await _follow(api, uid, search, printed, show, out, err)
    return Exit.OK


def _shown(output: str, colour: bool) -> Callable[[dict[str, Any]], str]:
    """How one line is printed for ``-o``: :func:`render`, or the API's entry as a record."""
    if output in rendering.DOCUMENTS:
        return lambda entry: rendering.record(entry, output)
    return lambda entry: render(entry, colour)


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


async def _pages(
    api: ApiClient, uid: str, search: dict[str, str], show: Callable[[dict[str, Any]], str], out: TextIO
) -> _Printed:
    """Print every stored line; what was printed last."""
    params = {"limit": str(PAGE), **search}
    printed = _Printed()
    while True:
        page = await api.get(f"/api/v1/runs/{uid}/logs", params)
        for entry in page["items"]:
            print(show(entry), file=out)
            printed.add(entry)
        out.flush()
        if not page.get("next_cursor"):
            return printed
        params["cursor"] = page["next_cursor"]


async def _follow(
    api: ApiClient,
    uid: str,
    search: dict[str, str],
    printed: _Printed,
    show: Callable[[dict[str, Any]], str],
    out: TextIO,
    err: TextIO,
) -> None:
    """Print the lines stored from now on (those of the last printed timestamp once), until
    interrupted; a lost connection resumes after the last line received."""
    params = {"follow": "true", **search}
    if printed.at is not None:
        params["since"] = printed.at
    async for event in api.events(f"/api/v1/runs/{uid}/logs", params, err=err, prefix="logs"):
        if event.event != "line":
            continue
        entry = json.loads(event.data)
        if printed.new(entry):
            printed.add(entry)
            print(show(entry), file=out, flush=True)


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """The ``logs`` subcommand's arguments (on ``commands``, an argparse subparsers action)."""
    parser = grammar.command(
        commands,
        "logs",
        "print a run's launcher and worker logs through the API, merged by time",
        description="Each line: TIME (UTC) POD[rank N] TEXT. --grep takes an RE2 expression (a\n"
        "substring is one); -f then prints new lines as they are stored, until Ctrl-C.",
        examples=[
            "mpijob-controller logs team-a/train --grep 'NCCL|CUDA'",
            "mpijob-controller logs team-a/train --attempt 1 -i --grep 'out of memory'",
            "mpijob-controller logs team-a/train --since 10m -f",
            "mpijob-controller logs team-a/train -o json | jq -r .text",
        ],
        exits=(Exit.OK, Exit.USAGE, Exit.REFUSED, Exit.NOT_FOUND, Exit.INTERRUPTED),
    )
    parser.add_argument("target", metavar="NAMESPACE/JOB", type=job_target)
    parser.add_argument("--attempt", type=_attempt, help="the attempt number (default: the newest)")
    parser.add_argument("--follow", "-f", action="store_true", help="then print new lines as they come")
    parser.add_argument("--grep", metavar="PATTERN", help="only lines this RE2 expression matches")
    parser.add_argument("-i", "--ignore-case", action="store_true", help="--grep ignoring case (as grep -i)")
    grammar.add_window(parser, "lines logged")
    grammar.add_output(parser, ("table", *rendering.DOCUMENTS))
    add_client_options(parser)
    return parser


def _attempt(value: str) -> int:
    number = int(value)
    if not 1 <= number <= 999_999_999:
        raise ValueError(value)
    return number
