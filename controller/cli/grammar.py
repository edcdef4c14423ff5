"""The options every command spells the same way, and how ``--help`` reads.

- ``-n/--namespace NAMESPACE`` on each command that lists (``runs``, ``history``, ``audit export``);
- ``-o/--output table|wide|json|yaml`` on each command that prints records
  (:mod:`controller.cli.rendering`);
- ``--since``/``--until``: a duration back from now (``90s``, ``30m``, ``2h``, ``1h30m``, ``7d``) or
  an RFC 3339 time with its offset (``2026-11-20T10:00:00Z``), one parser (:func:`instant`);
- durations (``--timeout``): the same ``90s``/``30m``/``2h``/``1h30m``/``7d`` (:func:`parse_duration`);
- ``--debug``: a traceback for an error that otherwise is one line.

``--help`` is plain text as written (no reflowing), ends with examples, and, on each command, the
exit statuses (:mod:`controller.cli.exits`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.cli.exits import Exit

__all__ = [
    "OUTPUTS",
    "add_debug",
    "add_namespace",
    "add_output",
    "add_window",
    "command",
    "duration",
    "instant",
    "parse_duration",
]

OUTPUTS = ("table", "wide", "json", "yaml")
_DURATION = re.compile(r"^(?:(\d{1,6})d)?(?:(\d{1,7})h)?(?:(\d{1,9})m)?(?:(\d{1,10}(?:\.\d{1,9})?)s?)?$")


def parse_duration(value: str) -> float:
    """Seconds of ``2h``, ``1h30m``, ``90s``, ``45`` (seconds), ``7d``; ValueError otherwise."""
    matched = _DURATION.fullmatch(value.strip())
    if not value.strip() or matched is None:
        raise ValueError(f"{value!r} is not a duration such as 2h, 30m, 90s, 1h30m or 7d")
    days, hours, minutes, seconds = matched.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)


def duration(value: str) -> float:
    """:func:`parse_duration` as an argparse type (which shows the message)."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def instant(value: str, now: datetime | None = None) -> datetime:
    """``--since``/``--until``: a duration back from ``now`` (``2h``, ``7d``) or an RFC 3339 time
    with its offset (``2026-11-20T10:00:00Z``); the time in UTC, ValueError otherwise."""
    try:
        back = parse_duration(value)
    except ValueError:
        pass
    else:
        try:
            return (now or datetime.now(UTC)) - timedelta(seconds=back)
        except OverflowError:
            raise ValueError(f"{value!r} reaches back before year 1") from None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is neither a duration (2h, 7d) nor an RFC 3339 time") from None
    if when.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset: add Z or +01:00")
    return when.astimezone(UTC)


def _instant(value: str) -> datetime:
    try:
        return instant(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_namespace(parser: argparse.ArgumentParser, help: str = "only this namespace") -> None:
    """``-n/--namespace``."""
    parser.add_argument("-n", "--namespace", metavar="NAMESPACE", help=help)


def add_output(parser: argparse.ArgumentParser, choices: Sequence[str] = OUTPUTS) -> None:
    """``-o/--output``: a table for a terminal (``wide``: more columns), JSON or YAML for a program."""
    parser.add_argument(
        "-o",
        "--output",
        choices=list(choices),
        default="table",
        help="table (default), " + ", ".join(choices[1:]) + ": times in RFC 3339 UTC",
    )


def add_window(parser: argparse.ArgumentParser, what: str) -> None:
    """``--since``/``--until`` (:func:`instant`), both optional."""
    parser.add_argument(
        "--since",
        type=_instant,
        metavar="WHEN",
        help=f"{what} at or after WHEN: a duration back from now (2h, 7d) or 2026-11-20T10:00:00Z",
    )
    parser.add_argument("--until", type=_instant, metavar="WHEN", help=f"{what} before WHEN: as --since")


def add_debug(parser: argparse.ArgumentParser) -> None:
    """``--debug`` (after the command's name too)."""
    parser.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print the traceback of an error that is otherwise one line",
    )


def _exits(codes: Sequence[Exit]) -> str:
    return "exit status:\n" + "\n".join(f"  {int(code):<4} {code.meaning}" for code in codes)


def command(
    commands: Any,
    name: str,
    summary: str,
    *,
    description: str = "",
    examples: Sequence[str] = (),
    exits: Sequence[Exit] = (Exit.OK, Exit.USAGE, Exit.INTERRUPTED),
    **kwargs: Any,
) -> argparse.ArgumentParser:
    """A subcommand of ``commands`` (an argparse subparsers action) whose ``--help`` shows
    ``summary``, ``description`` as written, the ``examples`` and its exit statuses."""
    epilog = "\n\n".join(
        part
        for part in (
            "examples:\n" + "\n".join(f"  {line}" for line in examples) if examples else "",
            _exits(exits),
        )
        if part
    )
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=summary,
        description=f"{summary}.\n\n{description}".rstrip() if description else f"{summary}.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **kwargs,
    )
    add_debug(parser)
    return parser
