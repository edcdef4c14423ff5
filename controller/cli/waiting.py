"""``wait NAMESPACE/JOB``: follow a job's live events through the API until it ends, for pipelines.

Reads ``GET /api/v1/namespaces/{ns}/jobs/{name}/events`` (Server-Sent Events) with a bearer token
(:mod:`controller.cli.apiclient`: a pod's service-account token by default), prints each phase
change and each finding as it comes, and exits:

- 0 when the goal is met (``--for succeeded``: the attempt succeeded; ``running``: it runs or
  ran to success; ``finished``: it ended, however);
- 1 when it cannot be met any more (the attempt failed or was deleted), after printing the
  finding that explains it: its root cause and remediation;
- 2 when ``--timeout`` passes first;
- 3 when the API refuses to answer (the token, the caller's permissions, the request), or ends
  the stream with ``denied`` (the token was revoked or the caller's access removed meanwhile).

A lost connection (an API restart, a rolling update, a proxy's idle timeout) is retried with
backoff, up to 30 s apart, resuming with ``Last-Event-ID`` so nothing is printed twice or missed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import sys
import time
from typing import Any, Literal, TextIO

import httpx
from httpx_sse import SSEError, aconnect_sse

from controller.cli.apiclient import (
    Refused,
    Unavailable,
    add_client_options,
    authorization,
    raise_for,
    tls_verification,
)
from controller.contract.settings import ClientSettings

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_SUCCESS",
    "EXIT_TIMEOUT",
    "Goal",
    "Watch",
    "parse_duration",
    "wait",
]

EXIT_SUCCESS, EXIT_FAILED, EXIT_TIMEOUT, EXIT_ERROR = 0, 1, 2, 3
Goal = Literal["finished", "succeeded", "running"]
MAX_BACKOFF_S = 30.0
READ_TIMEOUT_S = 90.0
"""A connection silent this long (no event, no heartbeat) is taken for lost and reopened."""
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}
_DURATION = re.compile(r"^(?:(\d{1,6})d)?(?:(\d{1,7})h)?(?:(\d{1,9})m)?(?:(\d{1,10}(?:\.\d{1,9})?)s?)?$")


def parse_duration(value: str) -> float:
    """Seconds of ``2h``, ``1h30m``, ``90s``, ``45`` (seconds), ``7d``; ValueError otherwise."""
    matched = _DURATION.fullmatch(value.strip())
    if not value.strip() or matched is None:
        raise ValueError(f"{value!r} is not a duration such as 2h, 30m, 90s, 1h30m or 7d")
    days, hours, minutes, seconds = matched.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60 + float(seconds or 0)


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    lines: tuple[str, ...]


@dataclasses.dataclass
class Watch:
    """What the events said so far, and whether they settle the wait."""

    goal: Goal
    phase: str | None = None
    said_waiting: bool = False

    def on(self, kind: str, data: dict[str, Any]) -> tuple[list[str], Outcome | None]:
        """Lines to print for one event, and the outcome if the event settles the wait."""
        job = f"{data.get('namespace')}/{data.get('name')} attempt {data.get('attempt')}"
        if kind == "phase":
            self.phase = str(data.get("phase"))
            reason = f" ({data['reason']})" if data.get("reason") else ""
            lines = [f"{data.get('at')}  {job}: {self.phase}{reason}"]
            if self.phase == "Succeeded" or (self.goal == "running" and self.phase == "Running"):
                return lines, Outcome(EXIT_SUCCESS, (f"{job} is {self.phase}",))
            return lines, None
        if kind == "finding":
            finding = data.get("finding") or {}
            return [
                f"{data.get('at')}  {job}: finding {finding.get('rule')} "
                f"({finding.get('severity')}, {finding.get('status')}): {finding.get('root_cause')}"
            ], None
        if kind == "deleted":
            return [f"{data.get('at')}  {job}: deleted"], None
        if kind == "waiting":  # sent again at each reconnect: said once
            line = f"waiting for the next attempt of {data.get('namespace')}/{data.get('name')}"
            said, self.said_waiting = self.said_waiting, True
            return ([] if said else [line]), None
        if kind == "end":
            return [], self._end(job, data)
        if kind == "denied":  # the caller lost the right to read the job: asking again is refused
            return [], Outcome(EXIT_ERROR, (f"wait: the API ended the stream: {data.get('reason')}",))
        return [], None

    def _end(self, job: str, data: dict[str, Any]) -> Outcome:
        phase = data.get("phase")
        if phase == "Succeeded":
            return Outcome(EXIT_SUCCESS, (f"{job} is Succeeded",))
        what = (
            "was deleted before it finished" if data.get("deleted") and phase != "Failed" else f"is {phase}"
        )
        findings = sorted(data.get("findings") or [], key=lambda f: _SEVERITY.get(f.get("severity"), 9))
        lines = [f"{job} {what}"]
        if findings:
            cause = findings[0]
            lines.append(
                f"root cause ({cause.get('rule')}, {cause.get('severity')}): {cause.get('root_cause')}"
            )
            lines += [f"  - {step}" for step in cause.get("remediation") or ()]
            if cause.get("doc_anchor"):
                lines.append(f"  see {cause['doc_anchor']}")
            lines += [f"also firing: {f.get('rule')}: {f.get('root_cause')}" for f in findings[1:]]
        elif phase == "Failed":
            lines.append("no finding explains the failure yet: see the run's timeline")
        return Outcome(EXIT_SUCCESS if self.goal == "finished" else EXIT_FAILED, tuple(lines))


@dataclasses.dataclass
class _Stream:
    url: str
    params: dict[str, str]
    client: ClientSettings
    watch: Watch
    out: TextIO
    last_id: str | None = None
    received: bool = False
    seen: set[tuple[Any, Any]] = dataclasses.field(default_factory=set)

    def headers(self) -> dict[str, str]:
        headers = {**authorization(self.client), "Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = self.last_id
        return headers

    async def follow(self, client: httpx.AsyncClient) -> Outcome:
        """Events until one settles the wait; raises :class:`Unavailable` when the connection is lost."""
        self.received = False
        params = {} if self.last_id is not None else self.params
        try:
            async with aconnect_sse(client, "GET", self.url, params=params, headers=self.headers()) as source:
                response = source.response
                if response.status_code != 200:
                    await response.aread()
                    raise_for(response)
                async for event in source.aiter_sse():
                    self.received = True
                    outcome = self._on(event.event, event.data)
                    if event.id:
                        self.last_id = event.id
                    if outcome is not None:
                        return outcome
        except (httpx.TransportError, SSEError) as exc:
            raise Unavailable(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc
        raise Unavailable("the API closed the stream")

    def _on(self, kind: str, raw: str) -> Outcome | None:
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        seen = (data.get("uid"), data.get("seq"))
        if seen[1] is not None:
            if seen in self.seen:  # sent again after a connection broke within one poll's entries
                return None
            self.seen.add(seen)
        lines, outcome = self.watch.on(kind, data)
        for line in lines:
            print(line, file=self.out, flush=True)
        return outcome


async def wait(
    target: str,
    client: ClientSettings,
    *,
    goal: Goal = "succeeded",
    attempt: str = "latest",
    timeout_s: float = 7200.0,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Follow ``target`` (``namespace/job``) until ``goal`` is met or cannot be; the exit status."""
    namespace, _, name = target.partition("/")
    if not namespace or not name or "/" in name:
        print(f"wait: {target!r} is not NAMESPACE/JOB", file=err)
        return EXIT_ERROR
    url = f"{client.api_url.rstrip('/')}/api/v1/namespaces/{namespace}/jobs/{name}/events"
    stream = _Stream(url, {"attempt": attempt}, client, Watch(goal), out)
    timeout = httpx.Timeout(10.0, read=READ_TIMEOUT_S)
    deadline = time.monotonic() + timeout_s
    backoff = 0.5
    async with httpx.AsyncClient(timeout=timeout, verify=tls_verification(client)) as http:
        while True:
            left = deadline - time.monotonic()
            try:
                if left <= 0:
                    raise TimeoutError
                async with asyncio.timeout(left):
                    outcome = await stream.follow(http)
                for line in outcome.lines:
                    print(line, file=out if outcome.code == EXIT_SUCCESS else err, flush=True)
                return outcome.code
            except TimeoutError:
                print(f"wait: {target} did not reach {goal} within {_span(timeout_s)}", file=err, flush=True)
                return EXIT_TIMEOUT
            except Refused as exc:
                print(f"wait: {exc}", file=err, flush=True)
                return EXIT_ERROR
            except Unavailable as exc:
                backoff = 0.5 if stream.received else min(backoff * 2, MAX_BACKOFF_S)
                pause = min(max(backoff, exc.after or 0.0), max(deadline - time.monotonic(), 0.0))
                print(f"wait: lost the API ({exc}); reconnecting in {pause:.1f} s", file=err, flush=True)
                await asyncio.sleep(pause)


def _span(seconds: float) -> str:
    whole = int(seconds)
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m{whole % 60:02d}s"


def add_parser(commands: Any) -> Any:
    """The ``wait`` subcommand's arguments (on ``commands``, an argparse subparsers action)."""
    parser = commands.add_parser(
        "wait",
        help="follow a job through the API until it ends: exit 0 succeeded, 1 failed, 2 timed out",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    parser.add_argument("target", metavar="NAMESPACE/JOB")
    parser.add_argument(
        "--attempt",
        default="latest",
        type=_attempt,
        help="latest (default: the newest, or the first to appear), next (the first created from now "
        "on: for a re-run under the same name) or an attempt number",
    )
    parser.add_argument(
        "--for", dest="goal", choices=["finished", "succeeded", "running"], default="succeeded"
    )
    parser.add_argument("--timeout", type=duration, default=7200.0, help="e.g. 2h (default), 30m, 90s")
    add_client_options(parser)
    return parser


def _attempt(value: str) -> str:
    if value in {"latest", "next"} or re.fullmatch(r"[1-9][0-9]{0,8}", value):
        return value
    raise ValueError(value)


def duration(value: str) -> float:
    """``--timeout``'s argument type (argparse names it in its error)."""
    return parse_duration(value)
