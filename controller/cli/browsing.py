"""``runs``, ``findings`` and ``compare``: the history, read through the API with the user's own token.

A user (or a script) needs no database credentials: each command asks the API
(:mod:`controller.cli.apiclient`), which shows only what the token may read, and prints a table
or, with ``-o json``, the API's JSON (:mod:`controller.cli.rendering`). ``history`` stays for
administrators with the database at hand.

A run is named by its uid or by ``NAMESPACE/JOB`` (the newest attempt) or ``NAMESPACE/JOB@N``
(attempt N). Exit status: 0 answered, 1 the API refused (the line says why: 401 a token it does not
accept, 403 a namespace the token may not read, 404 no such run, or one it may not read) or could
not be reached, 2 a malformed argument.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO
from urllib.parse import quote

from controller.cli import rendering
from controller.cli.apiclient import ApiClient, Refused, add_client_options
from controller.cli.waiting import parse_duration

__all__ = [
    "EXIT_REFUSED",
    "MAX_RUNS",
    "RunRef",
    "add_parsers",
    "check",
    "compare",
    "findings",
    "instant",
    "resolve",
    "run_ref",
    "runs",
]

EXIT_REFUSED = 1
MAX_RUNS = 10_000
"""Most runs one ``runs`` command prints; the rest is one ``--cursor`` away."""
PAGE = 500
"""The API's largest page."""
MAX_COMPARED = 5
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_UID = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9_.]{0,63}$")
_ATTEMPT = re.compile(r"^[1-9][0-9]{0,8}$")


@dataclasses.dataclass(frozen=True)
class RunRef:
    """A run as the user names it: by ``uid``, or by ``namespace``/``name`` and an ``attempt``
    (None: the newest)."""

    uid: str | None = None
    namespace: str = ""
    name: str = ""
    attempt: int | None = None

    def __str__(self) -> str:
        if self.uid is not None:
            return self.uid
        return f"{self.namespace}/{self.name}" + (f"@{self.attempt}" if self.attempt else "")


def run_ref(value: str) -> RunRef:
    """``UID``, ``NAMESPACE/JOB`` or ``NAMESPACE/JOB@N``; ValueError (argparse names it) otherwise."""
    if "/" not in value:
        if not _UID.fullmatch(value):
            raise ValueError(value)
        return RunRef(uid=value)
    namespace, _, rest = value.partition("/")
    name, at, attempt = rest.partition("@")
    if (
        not _LABEL.fullmatch(namespace)
        or not _NAME.fullmatch(name)
        or (at and not _ATTEMPT.fullmatch(attempt))
    ):
        raise ValueError(value)
    return RunRef(namespace=namespace, name=name, attempt=int(attempt) if at else None)


def instant(value: str, now: datetime | None = None) -> str:
    """``--since``/``--until``: a duration back from now (``2h``, ``7d``) or an RFC 3339 time with its
    offset (``2026-11-20T10:00:00Z``); the RFC 3339 time in UTC, ValueError otherwise."""
    try:
        back = parse_duration(value)
    except ValueError:
        pass
    else:
        try:
            return ((now or datetime.now(UTC)) - timedelta(seconds=back)).isoformat()
        except OverflowError:
            raise ValueError(f"{value!r} reaches back before year 1") from None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is neither a duration (2h, 7d) nor an RFC 3339 time") from None
    if when.tzinfo is None:
        raise ValueError(f"{value!r} has no UTC offset: add Z or +01:00")
    return when.astimezone(UTC).isoformat()


def _path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


async def _runs_page(api: ApiClient, path: str, params: dict[str, Any], limit: int) -> tuple[list[Any], Any]:
    """Up to ``limit`` runs of the list at ``path``, page after page; and the cursor after them."""
    items: list[Any] = []
    cursor = params.pop("cursor", None)
    while True:
        asked = {**params, "limit": min(PAGE, limit - len(items))}
        page = await api.get(path, asked if cursor is None else {**asked, "cursor": cursor})
        items += page["items"]
        cursor = page.get("next_cursor")
        if cursor is None or len(items) >= limit:
            return items, cursor


async def _uid_of(api: ApiClient, ref: RunRef) -> str:
    """The uid of the attempt ``ref`` names (its newest without one), from the job's runs, newest first."""
    path = f"/api/v1/namespaces/{_path(ref.namespace, 'jobs', ref.name)}/runs"
    cursor: str | None = None
    while True:
        page = await api.get(path, {"limit": PAGE} if cursor is None else {"limit": PAGE, "cursor": cursor})
        for run in page["items"]:
            if ref.attempt is None or run["attempt"] == ref.attempt:
                return str(run["uid"])
            if run["attempt"] < ref.attempt:  # older ones follow: there is no attempt N
                break
        else:
            cursor = page.get("next_cursor")
            if cursor is not None:
                continue
        what = f"attempt {ref.attempt} of" if ref.attempt else "run of"
        raise Refused(f"no {what} {ref.namespace}/{ref.name} that this token may read")


async def resolve(api: ApiClient, ref: RunRef) -> dict[str, Any]:
    """The run ``ref`` names, as ``GET /api/v1/runs/{uid}`` answers it (with its findings)."""
    uid = ref.uid if ref.uid is not None else await _uid_of(api, ref)
    detail: dict[str, Any] = await api.get(f"/api/v1/runs/{_path(uid)}")
    return detail


async def runs(api: ApiClient, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """``runs``: the runs the filters select, newest first, following the API's cursor."""
    params: dict[str, Any] = {
        key: value
        for key, value in (
            ("namespace", args.namespace),
            ("name", args.name),
            ("kind", args.kind),
            ("phase", args.phase),
            ("label", args.label),
            ("created_after", args.since),
            ("created_before", args.until),
            ("cursor", args.cursor),
        )
        if value
    }
    items, cursor = await _runs_page(api, "/api/v1/runs", params, args.limit)
    if args.output == "json":
        print(rendering.as_json({"items": items, "next_cursor": cursor}), file=out)
        return 0
    if items:
        print(rendering.runs_table(items, datetime.now(UTC)), file=out)
    else:
        print("no runs match", file=err)
    if cursor is not None:
        print(f"more runs: add --cursor {cursor}", file=err)
    return 0


_DETAIL_ONLY = ("spec", "conditions", "pods", "findings")


async def findings(api: ApiClient, args: argparse.Namespace, out: TextIO, _: TextIO) -> int:
    """``findings RUN``: what the rules concluded about one run, firing first."""
    detail = await resolve(api, args.run)
    run = {key: value for key, value in detail.items() if key not in _DETAIL_ONLY}
    if args.output == "json":
        print(rendering.as_json({"run": run, "items": detail["findings"]}), file=out)
    else:
        print(rendering.findings_table(run, detail["findings"]), file=out)
    return 0


async def compare(api: ApiClient, args: argparse.Namespace, out: TextIO, _: TextIO) -> int:
    """``compare RUN RUN [RUN…]``: 2 to 5 runs side by side, in the order given."""
    uids = [ref.uid if ref.uid is not None else await _uid_of(api, ref) for ref in args.runs]
    if len(set(uids)) != len(uids):
        raise Refused("each run may appear once (two of the names given are the same run)")
    comparison = await api.get("/api/v1/compare", {"runs": ",".join(uids)})
    if args.output == "json":
        print(rendering.as_json(comparison), file=out)
    else:
        print(rendering.comparison_table(comparison, all_spec=args.all_spec), file=out)
    return 0


def _limit(value: str) -> int:
    number = int(value)
    if not 1 <= number <= MAX_RUNS:
        raise ValueError(value)
    return number


def _cursor(value: str) -> str:
    if not value or len(value) > 512 or not re.fullmatch(r"[A-Za-z0-9_-]+", value):
        raise ValueError(value)
    return value


def _instant(value: str) -> str:
    """``instant`` for argparse, which shows the message."""
    try:
        return instant(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _run(value: str) -> RunRef:
    """``run_ref`` for argparse, which shows the message."""
    try:
        return run_ref(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a run: UID, NAMESPACE/JOB or NAMESPACE/JOB@ATTEMPT"
        ) from None


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", choices=["table", "json"], default="table")
    add_client_options(parser)


def add_parsers(commands: Any) -> None:
    """``runs``, ``findings`` and ``compare`` on ``commands`` (an argparse subparsers action); each
    parser's ``browse`` default is its coroutine."""
    listing = commands.add_parser(
        "runs", help="list runs through the API (filters as GET /api/v1/runs; newest first)"
    )
    listing.add_argument("-n", "--namespace", help="only this namespace (default: every one the token reads)")
    listing.add_argument("--name", help="only jobs of this name")
    listing.add_argument("--kind", choices=["MPIJob", "TrainJob"])
    listing.add_argument("--phase", choices=["Pending", "Running", "Suspended", "Succeeded", "Failed"])
    listing.add_argument("-l", "--label", action="append", metavar="KEY=VALUE", help="repeat: all must match")
    listing.add_argument("--since", type=_instant, help="created at or after: 2h, 7d or 2026-11-20T10:00:00Z")
    listing.add_argument("--until", type=_instant, help="created before: as --since")
    listing.add_argument(
        "--limit", type=_limit, default=50, help=f"most runs to print, 1 to {MAX_RUNS} (default 50)"
    )
    listing.add_argument("--cursor", type=_cursor, help="go on where a previous `runs` stopped")
    _common(listing)
    listing.set_defaults(browse=runs)

    finding = commands.add_parser("findings", help="a run's findings through the API, firing first")
    finding.add_argument(
        "run", type=_run, metavar="RUN", help="UID, NAMESPACE/JOB (newest) or NAMESPACE/JOB@N"
    )
    _common(finding)
    finding.set_defaults(browse=findings)

    side = commands.add_parser("compare", help="2 to 5 runs side by side through the API")
    side.add_argument(
        "runs", type=_run, nargs="+", metavar="RUN", help="UID, NAMESPACE/JOB (newest) or NAMESPACE/JOB@N"
    )
    side.add_argument(
        "--all-spec", action="store_true", help="show every spec field, not only those that differ"
    )
    _common(side)
    side.set_defaults(browse=compare, check=_compared)


def _compared(args: argparse.Namespace) -> str | None:
    if not 2 <= len(args.runs) <= MAX_COMPARED:
        return f"give 2 to {MAX_COMPARED} runs, not {len(args.runs)}"
    return None


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments beyond what argparse checks, or None."""
    checker = getattr(args, "check", None)
    return checker(args) if checker is not None else None
