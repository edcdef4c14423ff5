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
(``heapq.nsmallest``; a line's entry is built only for the page): memory is bounded by the page.
The read stops sooner once the page is settled: a container's subject holds its lines in the
order it wrote them, so once each subject of the run (where each ends: one ephemeral consumer of
the last message's headers per subject, :func:`~controller.bus.logstore.subject_ends`) was read
to its end or past the page's last line, no later batch can hold a line of the page. A first
page costs the batches stored until every container passed it (about one per container when
they write side by side), not the run's bytes (at most ``MPIJC_LOGS__RUN_MAX_BYTES``), which
bound the time of a page only where a container stored old lines late.

``q`` keeps lines containing it (case-insensitive); with ``regex=true`` it is an RE2 expression,
matched in time linear in the line (never a backtracking engine), invalid ones a 400, and so are
those whose compiled program is over ``MPIJC_API__LOG_SEARCH_MAX_PROGRAM`` instructions (RE2's
constant is the program's size).

Testing and parsing the stored batches is CPU work, done off the event loop on a few threads
the app's reads share (:class:`Searching`, ``MPIJC_API__LOG_SEARCH_THREADS``; RE2 lets go of the
GIL while it searches), a pull of batches at a time, under a budget of seconds of that work per
request (``MPIJC_API__LOG_SEARCH_BUDGET_S``). A read that spends it before the end is partial:
its page holds the lines found in the batches it scanned (stream sequences ``lo`` to ``hi``), in
time order among them, and ``next_cursor`` is a scan cursor — the rest of that stretch when more
than ``limit`` were found, else the stretch that starts after it. Every page that follows a scan
cursor is partial too: each merges by time one stretch of the stream, so no line is lost or
given twice, but lines are ordered within a stretch only. A stretch once scanned is read again
whole for its next page (its cost was once within a budget). With ``follow=true`` each pull of
new batches is tested under the same budget, and a follow that spent it rests as long as it
worked before it goes on. With ``follow=true`` the answer is Server-Sent Events, served as every
stream is (:mod:`controller.api.streaming`): each new line (``event: line``) as it is stored, in
the order stored, filtered the same way; each event's id is its line's cursor, so a client
reconnecting with ``Last-Event-ID`` resumes right after the last line it received.

Authorization is the run's (a run the caller may not read is 404), and reading container logs in
its namespace besides (``get pods/log`` in ``kubernetes`` mode; the namespace's read grant with
static tokens): 403 without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import heapq
import re
import time
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, ParamSpec, TypeVar

import re2
from fastapi import Header, HTTPException, Query, Request, Response
from pydantic_core import from_json

from controller.api.auth import Principal, may_read_logs
from controller.api.deps import engine_of
from controller.api.paging import MAX_CURSOR, Keyset, Limit
from controller.api.params import MAX_NAME, Instant, UidPath, errors
from controller.api.routing import Caller, api_router
from controller.api.streaming import MEDIA_TYPE, event, stream_response
from controller.api.visible_runs import readable_run
from controller.bus.client import JetStreamContext
from controller.bus.logstore import LogsUnavailableError, Raw, Stored, parsed, read_raw, subject_ends
from controller.contract.logs import LogBatch, LogLine, format_ns
from controller.contract.runs import LogEntry, LogPage
from controller.contract.settings import ApiSettings
from controller.contract.subjects import Topology
from controller.store.models import Run

__all__ = ["DEFAULT_SEARCH", "MAX_QUERY", "RunLogs", "SearchLimits", "Searching", "router"]

CLOCK_SKEW_S = 300.0
"""How far a kubelet's clock may run ahead of the bus's and its lines still be found by time."""
MAX_QUERY = 256
"""Characters of a search term or expression."""
_PLAIN_NEEDLE = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]+")
"""A keyword that JSON does not escape: printable ASCII without quote or backslash."""
_RE2_MAX_MEM = 8 * 1024 * 1024
"""Memory RE2 may use for one compiled expression (its bound on a hostile one)."""


@dataclass(frozen=True)
class SearchLimits:
    """What one read of a run's logs may cost: ``budget_s`` seconds of testing and parsing
    (``MPIJC_API__LOG_SEARCH_BUDGET_S``), on ``threads`` threads all reads share
    (``…_THREADS``), with RE2 programs of at most ``max_program`` instructions (``…_MAX_PROGRAM``)."""

    budget_s: float = 2.0
    threads: int = 2
    max_program: int = 1000

    @classmethod
    def from_settings(cls, api: ApiSettings) -> SearchLimits:
        """The limits ``api`` configures."""
        return cls(api.log_search_budget_s, api.log_search_threads, api.log_search_max_program)


DEFAULT_SEARCH = SearchLimits()

P = ParamSpec("P")
T = TypeVar("T")


class Searching:
    """The threads the log reads of one app share for their CPU work, and its limits."""

    def __init__(self, limits: SearchLimits) -> None:
        self.limits = limits
        self._pool = ThreadPoolExecutor(limits.threads, thread_name_prefix="log-search")

    async def run(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work`` on one of the threads, once those queued before it have had theirs."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, lambda: work(*args, **kwargs))


@dataclass(frozen=True)
class RunLogs:
    """Where the API reads logs: the ``LOGS`` stream of one installation."""

    js: JetStreamContext
    topology: Topology


Key = tuple[int, str, str, int, int]
"""(timestamp ns, pod, container, stream sequence, line in batch): the total order of a run's lines."""

Found = tuple[Key, LogBatch, int]
"""A kept line: its key, its batch, its place there (the batch's line count: its note)."""


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


@dataclass(frozen=True)
class Stretch:
    """Where a partial read goes on: the batches from stream sequence ``lo`` to ``hi`` (None: to
    the end, as far as the budget goes), lines after ``within`` of them (None: all), none at or
    before ``floor`` (the time cursor the read began after, if any)."""

    floor: Key | None
    lo: int
    hi: int | None
    within: Key | None


def _dump_stretch(at: Stretch) -> list[Any]:
    return [
        None if at.floor is None else list(at.floor),
        at.lo,
        at.hi,
        None if at.within is None else list(at.within),
    ]


def _load_stretch(values: list[Any]) -> Stretch:
    floor, lo, hi, within = values
    if type(lo) is not int or lo < 1 or (hi is not None and (type(hi) is not int or hi < lo)):
        raise ValueError("not a stretch of the stream")
    return Stretch(None if floor is None else _load(floor), lo, hi, None if within is None else _load(within))


SCAN: Keyset[Stretch] = Keyset("logscan", _dump_stretch, _load_stretch)
MAX_SCAN_CURSOR = 3 * MAX_CURSOR
"""Characters of a scan cursor: two line keys (each a pod's and a container's name) and two sequences."""

router = api_router("/api/v1", "logs", 400)

Pod = Annotated[
    str | None,
    Query(max_length=MAX_NAME, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", description="Only this pod."),
]
Rank = Annotated[int | None, Query(ge=0, le=1_000_000, description="Only lines this rank printed.")]
LogCursor = Annotated[
    str | None,
    Query(
        max_length=MAX_SCAN_CURSOR,
        pattern=r"^[-A-Za-z0-9_]+={0,2}$",
        description="`next_cursor` of the previous page; omit for the first page.",
    ),
]
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


def matcher(q: str | None, regex: bool, max_program: int = DEFAULT_SEARCH.max_program) -> Matcher:
    """What ``q`` keeps: a case-insensitive keyword, or an RE2 expression (400 if invalid, or if
    its compiled program has more than ``max_program`` instructions)."""
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
    except re2.error as exc:  # its message comes as bytes: b'missing ): ('
        reason = exc.args[0] if exc.args else ""
        reason = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        raise HTTPException(400, f"q is not a valid RE2 expression: {reason}") from exc
    size = max(pattern.programsize, 0 if joined is None else joined.programsize)
    if size > max_program:
        raise HTTPException(
            400,
            f"q compiles to an RE2 program of {size} instructions, over the bound of {max_program} "
            "(MPIJC_API__LOG_SEARCH_MAX_PROGRAM): a search's cost grows with it; write a shorter "
            "expression (fewer or smaller counted repetitions)",
        )
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

    def entries(self, stored: Stored) -> list[Found]:
        """The lines of a stored batch this filter keeps, with their keys (and its note, if any);
        each as where it is in the batch (its entry is built only for a page that shows it)."""
        batch = stored.batch
        kept: list[Found] = []
        if not self.keep.batch("\n".join(line.text for line in batch.lines)):
            lines: tuple[LogLine, ...] = ()
        else:
            lines = batch.lines
        rank, since, until, test = self.rank, self.since, self.until, self.keep.line
        pod, container, seq = batch.pod, batch.container, stored.seq
        for i, line in enumerate(lines):
            if rank is not None and line.rank != rank:
                continue
            if (since is not None and line.ts < since) or (until is not None and line.ts >= until):
                continue
            if test(line.text):
                kept.append(((line.ts, pod, container, seq, i), batch, i))
        if batch.note is not None and self.rank is None and test(batch.note):
            key = (batch.position.ts, pod, container, seq, len(batch.lines))
            kept.append((key, batch, len(batch.lines)))
        return kept


def _entry_of(found: Found) -> LogEntry:
    _, batch, i = found
    if i == len(batch.lines):
        assert batch.note is not None
        return _entry(batch, batch.position.ts, None, batch.note, note=True)
    line = batch.lines[i]
    return _entry(batch, line.ts, line.rank, line.text)


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


_POSITION_TS = re.compile(rb'"position":\{"ts":(\d+)')
"""Where a stored batch's JSON says its container's position (its last line's timestamp)."""


def _scan(
    group: list[Raw], chosen: _Filter, budget_s: float | None
) -> tuple[list[Found], int, float, dict[str, int]]:
    """The lines ``chosen`` keeps of ``group``'s batches, tested in order until ``budget_s``
    seconds are spent (at least one batch; None: all); with how many were tested, the seconds it
    took, and the last line's timestamp of each subject's latest batch tested (where known). Run
    on a search thread: the raw test, the parse and the line tests are the CPU a read costs."""
    began = time.perf_counter()
    kept: list[Found] = []
    reached: dict[str, int] = {}
    for done, raw in enumerate(group, 1):
        stored = parsed(raw, chosen.keep.raw)
        if stored is not None:
            kept += chosen.entries(stored)
            reached[raw.subject] = stored.batch.position.ts
        elif (at := _POSITION_TS.search(raw.data)) is not None:  # passed over unparsed
            reached[raw.subject] = int(at[1])
        if budget_s is not None and time.perf_counter() - began >= budget_s:
            return kept, done, time.perf_counter() - began, reached
    return kept, len(group), time.perf_counter() - began, reached


def searching_of(request: Request) -> Searching:
    """The app's search threads and limits."""
    searching: Searching = request.app.state.log_search
    return searching


def _resume(cursor: str | None) -> tuple[Key | None, Stretch | None]:
    """A page's cursor: a line's key (a whole read's) or a stretch (a partial one's); 400 if neither."""
    try:
        return KEYSET.decode(cursor), None
    except HTTPException:
        stretch = SCAN.decode(cursor)
        assert stretch is not None
        return stretch.floor, stretch


@router.get(
    "/runs/{uid}/logs",
    response_model=LogPage,
    responses={**errors(403, 404, 503), 200: {"content": {MEDIA_TYPE: {}}}},
)
async def run_logs(
    uid: UidPath,
    request: Request,
    principal: Caller,
    pod: Pod = None,
    rank: Rank = None,
    q: Search = None,
    regex: Annotated[bool, Query(description="`q` is an RE2 regular expression.")] = False,
    since: Annotated[Instant | None, Query(description="Lines at or after (RFC 3339).")] = None,
    until: Annotated[Instant | None, Query(description="Lines before (RFC 3339).")] = None,
    limit: Limit = 200,
    cursor: LogCursor = None,
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
    searching = searching_of(request)
    keep = matcher(q, regex, searching.limits.max_program)  # a refused expression costs no lookup
    async with engine_of(request).connect() as conn:
        run = await readable_run(conn, request, principal, uid)
    if not await may_read_logs(request, principal, run.namespace):
        raise HTTPException(403, f"reading logs needs get on pods/log in namespace {run.namespace!r}")
    logs = logs_of(request)
    if follow:
        after, stretch = KEYSET.decode(last_event_id or cursor), None
    else:
        after, stretch = _resume(cursor)
    since_ns = _ns(since)
    if after is not None:
        since_ns = max(since_ns or 0, after[0])
    chosen = _Filter(rank, since_ns, _ns(until), keep)
    if follow:
        return _followed(request, principal, logs, run, pod, chosen, after)
    try:
        return await _page(searching, logs, run, pod, chosen, limit, after, stretch)
    except LogsUnavailableError as exc:
        raise HTTPException(503, f"logs are not available: {exc}", headers={"Retry-After": "5"}) from exc


async def _page(
    searching: Searching,
    logs: RunLogs,
    run: Run,
    pod: str | None,
    chosen: _Filter,
    limit: int,
    after: Key | None,
    stretch: Stretch | None,
) -> LogPage:
    """The ``limit`` earliest lines after ``after`` (of ``stretch``, if given), read within the budget."""
    hi = None if stretch is None else stretch.hi
    if stretch is not None and stretch.hi is not None and stretch.within is not None:
        after = stretch.within  # a stretch read before: its lines up to ``within`` were given
    budget = searching.limits.budget_s if hi is None else None  # a stretch read before is read whole
    kept: list[Found] = []
    first: Raw | None = None
    last: Raw | None = None
    more = False  # batches were stored after the last one scanned
    settled = False  # the page is known whole before the end: no later batch can hold its lines
    spent = 0.0
    start_seq = None if stretch is None else stretch.lo
    ends = (
        None
        if stretch is not None
        else await subject_ends(
            logs.js, logs.topology, logs.topology.run_logs(run.namespace, run.name, run.uid, pod)
        )
    )
    reached: dict[str, int] = {}
    pulls = _ahead(_batches(logs, run, pod, chosen.since, follow=False, start_seq=start_seq))
    async with contextlib.aclosing(pulls):
        async for pulled in pulls:
            if pulled is None:
                continue
            beyond = hi is not None and pulled[-1].seq > hi
            group = pulled if hi is None else [raw for raw in pulled if raw.seq <= hi]
            if not group:
                more = beyond
                break
            left = None if budget is None else budget - spent
            found, done, took, seen = await searching.run(_scan, group, chosen, left)
            spent += took
            reached |= seen
            first, last = first or group[0], group[done - 1]
            more = beyond or done < len(group) or last.pending > 0
            kept += (found_ for found_ in found if after is None or found_[0] > after)
            if len(kept) > 4 * (limit + 1):  # keep memory to the page: only the earliest can be on it
                kept = heapq.nsmallest(limit + 1, kept, key=_key)
            if ends is not None and more and done == len(group) and len(kept) > limit:
                kept = heapq.nsmallest(limit + 1, kept, key=_key)
                settled = _settled(ends, reached, last.seq, kept[-1][0][0])
            if (
                settled
                or beyond
                or (hi is not None and last.seq >= hi)
                or (budget is not None and spent >= budget)
            ):
                break
    whole = stretch is None and (settled or not more)  # read whole within the budget: merged by time
    return _answer(kept, limit, whole, stretch, after, first, last, more)


def _answer(
    kept: list[Found],
    limit: int,
    whole: bool,
    stretch: Stretch | None,
    after: Key | None,
    first: Raw | None,
    last: Raw | None,
    more: bool,
) -> LogPage:
    """The page of the ``limit`` earliest of ``kept`` and its cursor: a line's key where the read
    was ``whole``, else the stretch it goes on with (from ``first`` to ``last`` scanned)."""
    ordered = heapq.nsmallest(limit + 1, kept, key=_key)
    page = ordered[:limit]
    items = [_entry_of(found_) for found_ in page]
    if whole:
        next_cursor = KEYSET.encode(page[-1][0]) if len(ordered) > limit else None
        return LogPage(items=items, next_cursor=next_cursor)
    if first is None or last is None:  # nothing left to scan
        return LogPage(items=items, next_cursor=None, partial=True)
    lo = first.seq if stretch is None else stretch.lo
    end = last.seq if stretch is None or stretch.hi is None else stretch.hi
    floor = after if stretch is None else stretch.floor
    if len(ordered) > limit:
        next_cursor = SCAN.encode(Stretch(floor, lo, end, page[-1][0]))
    elif more:
        next_cursor = SCAN.encode(Stretch(floor, end + 1, None, None))
    else:
        next_cursor = None
    return LogPage(items=items, next_cursor=next_cursor, partial=True, scanned_until=_rfc3339(last.at))


async def _ahead(source: AsyncGenerator[T, None]) -> AsyncGenerator[T, None]:
    """``source``'s items, the next one asked for while the caller works on this one (a pull of
    batches comes from the bus while the last is tested on a search thread); ``source`` is closed
    with it."""
    pending = asyncio.ensure_future(anext(source))
    try:
        while True:
            try:
                item = await pending
            except StopAsyncIteration:
                return
            pending = asyncio.ensure_future(anext(source))
            yield item
    finally:
        if not pending.done():
            pending.cancel()
            await asyncio.wait([pending])
        elif not pending.cancelled():
            pending.exception()  # retrieved: one the caller no longer wants
        await source.aclose()


def _settled(ends: dict[str, int], reached: dict[str, int], read_to: int, bound_ts: int) -> bool:
    """Whether no batch after stream sequence ``read_to`` can hold a line earlier than one at
    ``bound_ts``: each container subject's batches stored so far were read (it ends there), or
    one of its batches read ends after ``bound_ts`` (a container's lines are stored in the order
    it wrote them, each kubelet-stamped: its later batches' lines are not earlier)."""
    return all(end <= read_to or reached.get(subject, bound_ts) > bound_ts for subject, end in ends.items())


def _rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _key(pair: Found) -> Key:
    return pair[0]


def _batches(
    logs: RunLogs,
    run: Run,
    pod: str | None,
    since_ns: int | None,
    *,
    follow: bool,
    start_seq: int | None = None,
) -> AsyncGenerator[list[Raw] | None, None]:
    start = None
    if since_ns is not None:
        start = datetime.fromtimestamp(since_ns / 1e9, UTC) - timedelta(seconds=CLOCK_SKEW_S)
    return read_raw(
        logs.js,
        logs.topology,
        logs.topology.run_logs(run.namespace, run.name, run.uid, pod),
        start=start,
        start_seq=start_seq,
        follow=follow,
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
    ``Last-Event-ID`` (or as ``cursor``) gets the lines after it, none twice. Each pull is
    tested on the search threads under the read's budget; a follow that spent it rests as long."""
    searching = searching_of(request)

    async def frames() -> AsyncGenerator[str | None, None]:
        start = chosen.since
        if start is None:  # from now on
            start = time.time_ns()
            since = _Filter(chosen.rank, start, chosen.until, chosen.keep)
        else:
            since = chosen
        async for pulled in _batches(logs, run, pod, start, follow=True):
            if pulled is None:
                yield None
                continue
            group = pulled
            while group:
                found, done, took, _ = await searching.run(_scan, group, since, searching.limits.budget_s)
                for found_ in found:
                    if after is not None and found_[0] <= after:
                        continue
                    yield event(KEYSET.encode(found_[0]), "line", _entry_of(found_).model_dump())
                group = group[done:]
                if group:  # the budget is spent: rest as long, so a follow takes half a thread at most
                    await asyncio.sleep(took)

    return stream_response(request, principal, run.namespace, frames(), logs=True)
