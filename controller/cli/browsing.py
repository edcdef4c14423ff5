"""``runs``, ``findings`` and ``compare``: the history, read through the API with the user's own token.

A user (or a script) needs no database credentials: each command asks the API through the Python
client (:mod:`controller.client`), which shows only what the token may read, and prints a table
or, with ``-o json``/``-o yaml``, the API's answer (:mod:`controller.cli.rendering`). ``history``
stays for administrators with the database at hand.

A run is named by its uid or by ``NAMESPACE/JOB`` (the newest attempt) or ``NAMESPACE/JOB@N``
(attempt N; :mod:`controller.client.refs`); the client's ``find_attempt`` is the one lookup of
an attempt by number that ``wait`` and ``logs`` use too. Exit statuses are
:mod:`controller.cli.exits`' (3: the API refused, the line says why: 401 a token it does not
accept, 403 a namespace the token may not read; 4: no such run, or one the token may not read).
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from controller.cli import grammar, rendering
from controller.cli.apiclient import add_client_options
from controller.cli.exits import Exit, UsageError
from controller.client.refs import RunRef, job_ref, run_ref
from controller.contract.kinds import KINDS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from controller.client.aio import AsyncClient

    Browse = Callable[[AsyncClient, argparse.Namespace, TextIO, TextIO], Awaitable[Exit]]
    """What a browsing command runs: the API client, the arguments, stdout and stderr; its exit."""

__all__ = ["EXIT_REFUSED", "MAX_RUNS", "add_parsers", "compare", "findings", "job_target", "runs"]

EXIT_REFUSED = 1
MAX_RUNS = 10_000
"""Most runs one ``runs`` command prints; the rest is one ``--cursor`` away."""
MAX_COMPARED = 5


def job_target(value: str) -> tuple[str, str]:
    """:func:`~controller.client.refs.job_ref` as an argparse type (a malformed one is a usage
    error, exit 2)."""
    try:
        return job_ref(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _json(model: Any) -> Any:
    """A model of the API's answer as the API sent it (the tables and documents read that)."""
    return model.model_dump(mode="json", by_alias=True)


async def runs(api: AsyncClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> Exit:
    """``runs``: the runs the filters select, newest first, following the API's cursor."""
    page = await api.runs(
        args.namespace,
        name=args.name,
        kind=args.kind,
        phase=args.phase,
        labels=args.label,
        since=args.since,
        until=args.until,
        limit=args.limit,
        cursor=args.cursor,
    )
    items, cursor = [_json(run) for run in page.items], page.next_cursor
    if args.output in rendering.DOCUMENTS:
        print(rendering.document({"items": items, "next_cursor": cursor}, args.output), file=out)
        return Exit.OK
    if items:
        print(rendering.runs_table(items, datetime.now(UTC), wide=args.output == "wide"), file=out)
    else:
        print("no runs match", file=err)
    if cursor is not None:
        print(f"more runs: add --cursor {cursor}", file=err)
    return Exit.OK


_DETAIL_ONLY = ("spec", "conditions", "pods", "findings")


async def findings(api: AsyncClient, args: argparse.Namespace, out: TextIO, _: TextIO) -> Exit:
    """``findings RUN``: what the rules concluded about one run, firing first."""
    detail = _json(await api.run(args.run))
    run = {key: value for key, value in detail.items() if key not in _DETAIL_ONLY}
    if args.output in rendering.DOCUMENTS:
        print(rendering.document({"run": run, "items": detail["findings"]}, args.output), file=out)
    else:
        print(rendering.findings_table(run, detail["findings"]), file=out)
    return Exit.OK


async def compare(api: AsyncClient, args: argparse.Namespace, out: TextIO, _: TextIO) -> Exit:
    """``compare RUN RUN [RUN…]``: 2 to 5 runs side by side, in the order given."""
    if not 2 <= len(args.runs) <= MAX_COMPARED:
        raise UsageError(f"give 2 to {MAX_COMPARED} runs, not {len(args.runs)}")
    comparison = _json(await api.compare(*args.runs))
    if args.output in rendering.DOCUMENTS:
        print(rendering.document(comparison, args.output), file=out)
    else:
        wide = args.all_spec or args.output == "wide"
        print(rendering.comparison_table(comparison, all_spec=wide), file=out)
    return Exit.OK


def _limit(value: str) -> int:
    number = int(value)
    if not 1 <= number <= MAX_RUNS:
        raise ValueError(value)
    return number


def _cursor(value: str) -> str:
    if not value or len(value) > 512 or not re.fullmatch(r"[A-Za-z0-9_-]+", value):
        raise ValueError(value)
    return value


def _run(value: str) -> RunRef:
    """``run_ref`` for argparse, which shows the message."""
    try:
        return run_ref(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a run: UID, NAMESPACE/JOB or NAMESPACE/JOB@ATTEMPT"
        ) from None


def _browsing(parser: argparse.ArgumentParser, browse: Browse) -> None:
    """The options every browsing command takes, and what it runs."""
    grammar.add_output(parser)
    add_client_options(parser)
    parser.set_defaults(browse=browse)


RUN_HELP = "UID, NAMESPACE/JOB (its newest attempt) or NAMESPACE/JOB@N (attempt N)"
API_EXITS = (Exit.OK, Exit.USAGE, Exit.REFUSED, Exit.NOT_FOUND, Exit.INTERRUPTED)


def add_parsers(commands: Any) -> None:
    """``runs``, ``findings`` and ``compare`` on ``commands`` (an argparse subparsers action); each
    parser's ``browse`` default is its coroutine."""
    listing = grammar.command(
        commands,
        "runs",
        "list runs through the API, newest first",
        description="With the caller's own token: only what it may read. -o wide adds when each run\n"
        "started and finished and its labels; -o json and -o yaml give the API's answer.",
        examples=[
            "mpijob-controller runs -n team-a --phase Failed --since 7d",
            "mpijob-controller runs --kind PyTorchJob -l team=vision -o wide",
            "mpijob-controller runs -o json --limit 500 | jq '.items[].uid'",
        ],
        exits=API_EXITS,
    )
    grammar.add_namespace(listing, "only this namespace (default: every one the token reads)")
    listing.add_argument("--name", help="only jobs of this name")
    listing.add_argument("--kind", choices=[spec.kind for spec in KINDS], help="only runs of this kind")
    listing.add_argument("--phase", choices=["Pending", "Running", "Suspended", "Succeeded", "Failed"])
    listing.add_argument("-l", "--label", action="append", metavar="KEY=VALUE", help="repeat: all must match")
    grammar.add_window(listing, "created")
    listing.add_argument(
        "--limit", type=_limit, default=50, help=f"most runs to print, 1 to {MAX_RUNS} (default 50)"
    )
    listing.add_argument("--cursor", type=_cursor, help="go on where a previous `runs` stopped")
    _browsing(listing, runs)

    finding = grammar.command(
        commands,
        "findings",
        "a run's findings through the API, firing first, with what to do",
        examples=[
            "mpijob-controller findings team-a/train",
            "mpijob-controller findings team-a/train@1 -o json",
        ],
        exits=API_EXITS,
    )
    finding.add_argument("run", type=_run, metavar="RUN", help=RUN_HELP)
    _browsing(finding, findings)

    side = grammar.command(
        commands,
        "compare",
        "2 to 5 runs side by side through the API",
        description="Outcome, durations, restarts, failure causes, peak memory and the spec fields\n"
        "that differ (-o wide or --all-spec: every spec field).",
        examples=[
            "mpijob-controller compare team-a/train@1 team-a/train",
            "mpijob-controller compare team-a/train@1 team-a/train@2 -o yaml",
        ],
        exits=API_EXITS,
    )
    side.add_argument("runs", type=_run, nargs="+", metavar="RUN", help=RUN_HELP)
    side.add_argument(
        "--all-spec", action="store_true", help="show every spec field, not only those that differ"
    )
    _browsing(side, compare)
