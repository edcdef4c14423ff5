"""``logs NAMESPACE/JOB``: a run's launcher and worker logs through the API, merged by time.

Finds the attempt (``--attempt N``, the newest by default) as ``wait`` does
(the Python client's ``find_attempt``, :mod:`controller.client`), then prints every stored line of it from
``GET /api/v1/runs/{uid}/logs`` page by page, as ``TIME POD[rank N] TEXT`` (UTC, to the
millisecond; pods in colours on a terminal, unless ``NO_COLOR`` is set); ``--grep`` keeps the
lines an RE2 expression matches (``-i``: ignoring case), ``--since``/``--until`` those of a time
window. With ``--follow`` it then prints new lines as they are stored (the same endpoint's
Server-Sent Events, resumed with ``Last-Event-ID`` after a lost connection:
:meth:`controller.client.aio.AsyncClient.logs`) until interrupted. ``-o json`` prints each line
as the API gives it, one JSON object a line (JSON Lines); ``-o yaml``, as the items of one YAML list.
An attempt with no stored line (or none matching) says so in one line on stderr, and exits 0. The
API and the token are found as for ``wait`` (:mod:`controller.cli.apiclient`).

Exit statuses are :mod:`controller.cli.exits`': 0 printed, 4 no such job or attempt, 3 the API
refused (the token, the caller's permissions, the expression).
"""

from __future__ import annotations

import argparse
import os
import sys
import zlib
from collections.abc import Callable
from typing import Any, TextIO

from controller.cli import grammar, rendering
from controller.cli.apiclient import add_client_options
from controller.cli.browsing import job_target
from controller.cli.exits import Exit
from controller.client.errors import NotFound
from controller.client.refs import job_ref, not_found
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
    raised (:class:`~controller.client.errors.ClientError`); a malformed target, ValueError."""
    out, err = out or sys.stdout, err or sys.stderr
    namespace, name = job_ref(target) if isinstance(target, str) else target
    colour = out.isatty() and "NO_COLOR" not in os.environ
    show = _shown(output, colour)
    from controller.client.aio import AsyncClient  # the models: for the commands that use them only

    async with AsyncClient(settings=client, timeout_s=60.0) as api:
        run = await api.find_attempt(namespace, name, attempt)
        if run is None:
            raise NotFound(not_found(namespace, name, attempt))
        following = False

        def stored(count: int) -> None:
            nonlocal following
            out.flush()
            following = True
            if count == 0:
                which = " matching --grep, --since or --until" if grep or since or until else ""
                then = "; following new ones" if follow else ""
                print(
                    f"logs: no lines{which} are stored for {namespace}/{name} attempt {run.attempt}{then}",
                    file=err,
                    flush=True,
                )

        def lost(line: str) -> None:
            print(f"logs: {line}", file=err, flush=True)

        lines = api.logs(
            run.uid,
            grep=grep,
            ignore_case=ignore_case,
            since=since,
            until=until,
            follow=follow,
            on_stored=stored,
            notice=lost,
        )
        async for entry in lines:
            print(show(entry.model_dump(mode="json")), file=out, flush=following)
    return Exit.OK


def _shown(output: str, colour: bool) -> Callable[[dict[str, Any]], str]:
    """How one line is printed for ``-o``: :func:`render`, or the API's entry as a record."""
    if output in rendering.DOCUMENTS:
        return lambda entry: rendering.record(entry, output)
    return lambda entry: render(entry, colour)


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
