"""A run's followed logs (``GET /api/v1/runs/{uid}/logs``): launcher and workers merged by time,
each line labelled with its pod, container and rank, filtered, searched, paged, or followed.

Lines come from the ``LOGS`` stream (:mod:`controller.bus.logstore`), where the watchers'
followers store them (docs/logs.md). A page is the ``limit`` earliest lines after the cursor,
ordered by the kubelet's timestamp, then pod, container, and the order the container wrote them
(so lines of different pods sharing a timestamp, or a node whose clock is behind, still have one
total order): the cursor is that key. A read starts ``CLOCK_SKEW_S`` before the earliest line it
may return (a batch is stored after its lines were written, by a kubelet clock that may run
ahead of the bus's) and reads on to the end of what is stored (a follow that resumed after an
outage stores old lines late), keeping the ``limit`` + 1 earliest matching lines
(``heapq.nsmallest``): memory is bounded by the page, time by the run's bytes stored after that
point (at most ``MPIJC_LOGS__RUN_MAX_BYTES``).

``q`` keeps lines containing it (case-insensitive); with ``regex=true`` it is an RE2 expression,
matched in time linear in the line (never a backtracking engine), invalid ones a 400. With
``follow=true`` the answer is Server-Sent Events: each new line (``event: line``) as it is
stored, in the order stored, filtered the same way, with the stream limits of the events API;
each event's id is its line's cursor, so a client reconnecting with ``Last-Event-ID`` resumes
right after the last line it received.

Authorization is the run's (a run the caller may not read is 404), and reading container logs in
its namespace besides (``get pods/log`` in ``kubernetes`` mode; the namespace's read grant with
static tokens): 403 without it.
"""

from __future__ import annotations

import dataclasses
import heapq
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import re2
from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request, Response
from pydantic import BaseModel, ConfigDict
from pydantic_core import from_json

from controller.api.auth import Principal, current_principal, may_read_logs
from controller.api.events import gate_of, stream_response, with_heartbeats
from controller.api.paging import MAX_CURSOR, Cursor, Keyset, Limit, Page
from controller.api.params import AUTHENTICATED, MAX_NAME, Instant, UidPath, errors, known_query_only
from controller.api.runs import readable_run
from controller.bus.client import JetStreamContext
from controller.bus.logstore import LogsUnavailableError, Stored, read_run
from controller.contract.logs import LogBatch, LogLine, format_ns
from controller.contract.subjects import Topology
from controller.store.models import Run

__all__ = ["MAX_QUERY", "RunLogs", "router"]

CLOCK_SKEW_S = 300.0
"""How far a kubelet's clock may run ahead of the bus's and its lines still be found by time."""
MAX_QUERY = 256
"""Characters of a search term or expression."""
_PLAIN_NEEDLE = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+")
"""A keyword that JSON does not escape: printable ASCII without quote or backslash."""
_RE2_MAX_MEM = 8 * 1024 * 1024
"""Memory RE2 may use for one compiled expression (its bound on a hostile one)."""


@dataclass(frozen=True)
class RunLogs:
    """Where the API reads logs: the ``LOGS`` stream of one installation."""

    js: JetStreamContext
    topology: Topology


class LogEntry(BaseModel):
    """One line of a run's log."""

    model_config = ConfigDict(frozen=True)

    at: str
    """When the kubelet saw it (RFC 3339, nanoseconds)."""
    pod: str
    container: str
    role: str | None
    index: int | None
    rank: int | None
    text: str
    note: bool = False
    """A line of the controller's own (the run's byte cap reached), not of the container."""


class LogPage(Page[LogEntry]):
    """One page of a run's lines, in time order."""


Key = tuple[int, str, str, int, int]
"""(timestamp ns, pod, container, stream sequence, line in batch): the total order of a run's lines."""


def _load(values: list[Any]) -> Key:
    ts, pod, container, seq, line = values
    if (
        not all(type(v) is int for v in (ts, seq, line))
        or not isinstance(pod, str)
        or not isinstance(container, str)
    ):
        raise ValueError("not a log key")
    return ts, pod, container, seq, line


KEYSET: Keyset[Key] = Keyset("logs", list, _load)

router = APIRouter(
    prefix="/api/v1",
    tags=["logs"],
    dependencies=[Depends(known_query_only)],
    responses={**AUTHENTICATED, **errors(400)},
)

Pod = Annotated[
    str | None,
    Query(max_length=MAX_NAME, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", description="Only this pod."),
]
Rank = Annotated[int | None, Query(ge=0, le=1_000_000, description="Only lines this rank printed.")]
Search = Annotated[
    str | None,
    Query(min_length=1, max_length=MAX_QUERY, description="Only lines containing this (or matching it)."),
]


def logs_of(request: Request) -> RunLogs:
    """The app's log store; 503 where the API runs without one."""
    logs: RunLogs | None = getattr(request.app.state, "logs", None)
    if logs is None:
        raise HTTPException(503, "logs are not available: this API has no connection to the LOGS stream")
    return logs


@dataclass(frozen=True)
class Matcher:
    """What ``q`` keeps, line by line, and a test of a whole batch's text that is never false
    when one of its lines would be kept (so most batches are passed over in one scan)."""

    line: Callable[[str], bool]
    batch: Callable[[str], bool]
    raw: Callable[[bytes], bool] | None = None
    """A test of a stored batch's raw JSON, never false when a line of it would be kept (it lets
    most batches of a keyword search go unparsed); None: none that is safe."""


def matcher(q: str | None, regex: bool) -> Matcher:
    """What ``q`` keeps: a case-insensitive keyword, or an RE2 expression (400 if invalid)."""
    if q is None:
        return Matcher(lambda _: True, lambda _: True)
    if not regex:
        needle = q.casefold()
        keep = Matcher(lambda text: needle in text.casefold(), lambda text: needle in text.casefold())
        if _PLAIN_NEEDLE.fullmatch(q):  # JSON writes it as it is; ASCII lowercases alike as bytes
            raw = needle.encode()
            return dataclasses.replace(keep, raw=lambda data: not data.isascii() or raw in data.lower())
        return keep
    options = re2.Options()
    options.max_mem = _RE2_MAX_MEM
    options.log_errors = False
    try:
        pattern = re2.compile(q, options)
        # lines joined by newlines: ^ and $ at each line; text anchors would only match the first
        joined = re2.compile(f"(?m:{q})", options) if "\\A" not in q and "\\z" not in q else None
    except re2.error as exc:
        raise HTTPException(400, f"q is not a valid RE2 expression: {exc}") from exc
    line = lambda text: pattern.search(text) is not None  # noqa: E731
    if joined is None:
        return Matcher(line, lambda _: True)
    batch = lambda text: joined.search(text) is not None  # noqa: E731
    return Matcher(line, batch, lambda data: _texts_match(data, batch))


def _texts_match(data: bytes, batch: Callable[[str], bool]) -> bool:
    """Whether the lines (or the note) of a stored batch's raw JSON may hold a match, read without
    building the batch (a model per line costs more than the search); True where the JSON is
    not a batch's (it is then read, and skipped, as any other)."""
    try:
        stored = from_json(data)
        texts = [line["text"] for line in stored.get("lines", ())]
        if stored.get("note") is not None:
            texts.append(stored["note"])
        return batch("\n".join(texts))
    except (ValueError, AttributeError, TypeError, KeyError):
        return True


@dataclass(frozen=True)
class _Filter:
    rank: int | None
    since: int | None
    until: int | None
    keep: Matcher

    def entries(self, stored: Stored) -> list[tuple[Key, LogEntry]]:
        """The lines of a stored batch this filter keeps, with their keys (and its note, if any)."""
        batch = stored.batch
        kept = []
        if not self.keep.batch("\n".join(line.text for line in batch.lines)):
            lines: tuple[LogLine, ...] = ()
        else:
            lines = batch.lines
        for i, line in enumerate(lines):
            if self.rank is not None and line.rank != self.rank:
                continue
            if (self.since is not None and line.ts < self.since) or (
                self.until is not None and line.ts >= self.until
            ):
                continue
            if self.keep.line(line.text):
                kept.append(
                    (
                        (line.ts, batch.pod, batch.container, stored.seq, i),
                        _entry(batch, line.ts, line.rank, line.text),
                    )
                )
        if batch.note is not None and self.rank is None and self.keep.line(batch.note):
            key = (batch.position.ts, batch.pod, batch.container, stored.seq, len(batch.lines))
            kept.append((key, _entry(batch, batch.position.ts, None, batch.note, note=True)))
        return kept


def _entry(batch: LogBatch, ts: int, rank: int | None, text: str, *, note: bool = False) -> LogEntry:
    return LogEntry(
        at=format_ns(ts),
        pod=batch.pod,
        container=batch.container,
        role=batch.role,
        index=batch.index,
        rank=rank,
        text=text,
        note=note,
    )


def _ns(when: datetime | None) -> int | None:
    return None if when is None else int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000


@router.get(
    "/runs/{uid}/logs",
    response_model=LogPage,
    responses={**errors(403, 404, 503), 200: {"content": {"text/event-stream": {}}}},
)
async def run_logs(
    uid: UidPath,
    request: Request,
    principal: Annotated[Principal, Depends(current_principal)],
    pod: Pod = None,
    rank: Rank = None,
    q: Search = None,
    regex: Annotated[bool, Query(description="`q` is an RE2 regular expression.")] = False,
    since: Annotated[Instant | None, Query(description="Lines at or after (RFC 3339).")] = None,
    until: Annotated[Instant | None, Query(description="Lines before (RFC 3339).")] = None,
    limit: Limit = 200,
    cursor: Cursor = None,
    follow: Annotated[bool, Query(description="Stream new lines as Server-Sent Events.")] = False,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            max_length=MAX_CURSOR,
            description="With follow: the id of the last line received; the stream resumes after it.",
        ),
    ] = None,
) -> Any:
    """A run's launcher and worker lines merged by time (a page), or followed as they come."""
    engine = request.app.state.engine
    async with engine.connect() as conn:
        run = await readable_run(conn, request, principal, uid)
    if not await may_read_logs(request, principal, run.namespace):
        raise HTTPException(403, f"reading logs needs get on pods/log in namespace {run.namespace!r}")
    logs = logs_of(request)
    after = KEYSET.decode(last_event_id or cursor if follow else cursor)
    since_ns = _ns(since)
    if after is not None:
        since_ns = max(since_ns or 0, after[0])
    chosen = _Filter(rank, since_ns, _ns(until), matcher(q, regex))
    if follow:
        return _followed(request, principal, logs, run, pod, chosen, after)
    kept: list[tuple[Key, LogEntry]] = []
    try:
        async for stored in _batches(logs, run, pod, since_ns, follow=False, chosen=chosen):
            if stored is None:
                continue
            kept += (pair for pair in chosen.entries(stored) if after is None or pair[0] > after)
            if len(kept) > 4 * (limit + 1):  # keep memory to the page: only the earliest can be on it
                kept = heapq.nsmallest(limit + 1, kept, key=_key)
    except LogsUnavailableError as exc:
        raise HTTPException(503, f"logs are not available: {exc}", headers={"Retry-After": "5"}) from exc
    ordered = heapq.nsmallest(limit + 1, kept, key=_key)
    page = ordered[:limit]
    next_cursor = KEYSET.encode(page[-1][0]) if len(ordered) > limit else None
    return LogPage(items=[entry for _, entry in page], next_cursor=next_cursor)


def _key(pair: tuple[Key, LogEntry]) -> Key:
    return pair[0]


def _batches(
    logs: RunLogs, run: Run, pod: str | None, since_ns: int | None, *, follow: bool, chosen: _Filter
) -> AsyncIterator[Stored | None]:
    start = None
    if since_ns is not None:
        start = datetime.fromtimestamp(since_ns / 1e9, UTC) - timedelta(seconds=CLOCK_SKEW_S)
    return read_run(
        logs.js,
        logs.topology,
        run.namespace,
        run.name,
        run.uid,
        pod=pod,
        start=start,
        follow=follow,
        wanted=chosen.keep.raw,
    )


def _followed(
    request: Request,
    principal: Principal,
    logs: RunLogs,
    run: Run,
    pod: str | None,
    chosen: _Filter,
    after: Key | None,
) -> Response:
    """New lines as events whose id is the line's cursor: a client reconnecting with it as
    ``Last-Event-ID`` (or as ``cursor``) gets the lines after it, none twice."""
    gate = gate_of(request)

    async def frames() -> AsyncIterator[str | None]:
        start = chosen.since
        if start is None:  # from now on
            start = time.time_ns()
            since = _Filter(chosen.rank, start, chosen.until, chosen.keep)
        else:
            since = chosen
        async for stored in _batches(logs, run, pod, start, follow=True, chosen=since):
            if stored is None:
                yield None
                continue
            for key, entry in since.entries(stored):
                if after is not None and key <= after:
                    continue
                data = json.dumps(entry.model_dump(), separators=(",", ":"))
                yield f"id: {KEYSET.encode(key)}\nevent: line\ndata: {data}\n\n"

    return stream_response(request, principal, with_heartbeats(frames(), gate.limits))
