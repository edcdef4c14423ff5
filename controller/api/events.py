"""Live events of a run, or of a job name's attempts, as Server-Sent Events (``…/events``).

``GET /api/v1/runs/{uid}/events`` streams one run; ``GET /api/v1/namespaces/{ns}/jobs/{name}/events``
streams a job name: its chosen attempt (``attempt=latest|next|N``, waiting for it to be seen), and
after that attempt's ``end`` the next attempt under the same name, for as long as the client stays.

Every event comes from the history store (:mod:`controller.store.livefeed`), so its id is durable:
``<run uid>:<timeline id>``, or ``<run uid>:end``. The entries one poll finds are sent in time
order (``at``), which is not always id order (one transaction writes many), so only the last of
them carries an ``id:`` (the highest timeline id among them); each entry's own timeline id is its
data's ``seq``. A client reconnecting with ``Last-Event-ID``, to this API replica or another,
resumes right after the last id it got: nothing skipped, and nothing twice unless the connection
broke within a poll's entries (those come again; ``(uid, seq)`` tells them apart).
Event types: ``phase`` (the run entered a phase), ``deleted``, ``finding`` (a finding fired,
changed or resolved), ``timeline`` (any other timeline line: pods, Kubernetes events), ``end``
(the attempt is over: terminal and, for a failure, explained by a firing finding or given
``events_finding_grace_s`` to be) and, on a job name's stream that waits for the attempt after a
known one, ``waiting`` (its id resumes after that attempt: a reconnect waits for the same one).
Comment lines keep an idle stream open through proxies.

Authorization is the run API's: a run the caller may not read is 404 (as if absent), a namespace
they may not list is 403. Streams are served as :mod:`controller.api.streaming` serves every
stream: counted (429/503 beyond its caps), kept open by comment lines through proxies, and ended
by a ``denied`` event once the caller may no longer read the namespace.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import AsyncGenerator
from typing import Annotated, Any

from fastapi import Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.auth import require_namespace
from controller.api.deps import engine_of
from controller.api.feeds import RunFeeds
from controller.api.params import MAX_UID, UID, NamePath, NamespacePath, UidPath, errors
from controller.api.routing import Caller, api_router
from controller.api.streaming import MEDIA_TYPE, StreamGate, StreamLimits, event, gate_of, stream_response
from controller.api.visible_runs import readable_run
from controller.store import livefeed, queries
from controller.store.models import FindingRow, Run, TimelineEntryRow

__all__ = ["router"]

_EVENT_ID = re.compile(rf"({UID[1:-1]}):(end|[0-9]{{1,19}})")


router = api_router("/api/v1", "events", 400)

_STREAM: dict[int | str, dict[str, Any]] = {
    200: {"content": {MEDIA_TYPE: {}}, "description": "An endless stream of Server-Sent Events."}
}
LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        max_length=MAX_UID + 24,
        description="The id of the last event received: the stream resumes right after it.",
    ),
]


def _resume_point(value: str | None) -> tuple[str, int | None] | None:
    """``(uid, timeline id)`` of a ``Last-Event-ID`` (``None`` for an ``end``); 400 when malformed."""
    if value is None or value == "":
        return None
    matched = _EVENT_ID.fullmatch(value)
    if matched is None or len(matched[1]) > MAX_UID:
        raise HTTPException(400, f"Last-Event-ID {value!r} is not an id this API sent")
    return matched[1], None if matched[2] == "end" else int(matched[2])


@router.get("/runs/{uid}/events", response_class=StreamingResponse, responses={**_STREAM, **errors(404)})
async def run_events(
    uid: UidPath,
    request: Request,
    principal: Caller,
    last_event_id: LastEventId = None,
) -> Response:
    """One run's phases, findings and timeline as Server-Sent Events, from its start or from
    ``Last-Event-ID``; an ``end`` event closes it (and a reconnect after ``end`` gets 204)."""
    engine = engine_of(request)
    async with engine.connect() as conn:
        run = await readable_run(conn, request, principal, uid)
    resume = _resume_point(last_event_id)
    if resume is not None and resume[0] != uid:
        raise HTTPException(400, f"Last-Event-ID {last_event_id!r} is not an event of run {uid!r}")
    if resume is not None and resume[1] is None:
        return Response(status_code=204)
    gate = gate_of(request)
    cursor = resume[1] if resume and resume[1] is not None else 0
    return stream_response(request, principal, run.namespace, _one_run(gate.feeds, gate.limits, uid, cursor))


_Attempt = Annotated[
    str,
    Query(
        max_length=9,
        pattern=r"^(latest|next|[1-9][0-9]{0,8})$",
        description="Which attempt to start with: `latest` (the newest, or the first to be seen), "
        "`next` (the first created after the newest seen now) or its number.",
    ),
]


@router.get(
    "/namespaces/{namespace}/jobs/{name}/events",
    response_class=StreamingResponse,
    responses={**_STREAM, **errors(403)},
)
async def job_events(
    namespace: NamespacePath,
    name: NamePath,
    request: Request,
    principal: Caller,
    attempt: _Attempt = "latest",
    last_event_id: LastEventId = None,
) -> Response:
    """A job name's events: the chosen attempt's, then, after its ``end``, each next attempt's."""
    await require_namespace(request, principal, namespace)
    engine = engine_of(request)
    resume = _resume_point(last_event_id)
    async with engine.connect() as conn:
        if resume is not None:
            run = await _of_job(engine, resume[0], namespace, name)
            start = _Start(run=run, cursor=resume[1]) if resume[1] is not None else _Start(after=run)
        elif attempt == "latest":
            newest = await livefeed.newest_attempt(conn, namespace, name)
            start = _Start(run=newest)
        elif attempt == "next":
            start = _Start(after=await livefeed.newest_attempt(conn, namespace, name))
        else:
            start = _Start(number=int(attempt))
    return stream_response(
        request, principal, namespace, _attempts(engine, gate_of(request), namespace, name, start)
    )


@dataclasses.dataclass(frozen=True)
class _Start:
    """Where a job name's stream starts: in ``run`` after timeline id ``cursor``, with the first
    attempt created after ``after`` (or the first of all), or with attempt ``number``."""

    run: Run | None = None
    cursor: int = 0
    after: Run | None = None
    number: int | None = None


async def _of_job(engine: AsyncEngine, uid: str, namespace: str, name: str) -> Run:
    async with engine.connect() as conn:
        run = await queries.get_run(conn, uid)
    if run is None or run.namespace != namespace or run.name != name:
        raise HTTPException(400, f"Last-Event-ID names no attempt of job {namespace}/{name}")
    return run


async def _attempts(
    engine: AsyncEngine, gate: StreamGate, namespace: str, name: str, start: _Start
) -> AsyncGenerator[str | None, None]:
    """Each attempt's frames in turn, from ``start``, waiting for attempts not seen yet."""
    run, cursor, number = start.run, start.cursor, start.number
    after = (start.after.created_at, start.after.uid) if start.after is not None else None
    if run is None and start.after is not None:  # a reconnect resumes after the same attempt
        data = {"namespace": namespace, "name": name, "after": start.after.uid}
        yield event(f"{start.after.uid}:end", "waiting", data)
    while True:
        while run is None:
            async with engine.connect() as conn:
                if number is not None:
                    run = await livefeed.attempt(conn, namespace, name, number)
                else:
                    run = await livefeed.next_attempt(conn, namespace, name, after)
            if run is None:
                yield None
                await asyncio.sleep(gate.limits.poll_s)
        async for frame in _one_run(gate.feeds, gate.limits, run.uid, cursor):
            yield frame
        after, run, cursor, number = (run.created_at, run.uid), None, 0, None


async def _one_run(
    feeds: RunFeeds, limits: StreamLimits, uid: str, cursor: int
) -> AsyncGenerator[str | None, None]:
    """Frames of run ``uid`` after timeline id ``cursor`` to its ``end``, from the process's shared
    feed of the run; ``None`` for each poll without news."""
    feed = feeds.watch(uid)
    try:
        read = 0
        while True:
            tick = feed.tick
            sent = False
            for batch in feed.batches[read:]:
                entries = [entry for entry in batch.entries if entry.id > cursor]
                for n, entry in enumerate(entries, 1):
                    event_id = f"{uid}:{batch.cursor}" if n == len(entries) else None
                    yield _frame(entry, feed.run, batch.findings, event_id)
                sent = sent or bool(entries)
            read = len(feed.batches)
            if feed.polls and feed.run is None:  # purged from the store while watched
                yield event(f"{uid}:end", "end", {"uid": uid, "phase": None, "findings": []})
                return
            if feed.run is not None and feed.explained(limits.finding_grace_s):
                data = {**_about(feed.run), "deleted": feed.run.deleted_at is not None}
                data["findings"] = [_finding(f) for f in feed.firing]
                yield event(f"{uid}:end", "end", data)
                return
            if not sent:
                yield None
            await tick.wait()
    finally:
        feeds.leave(feed)


_ABOUT = ("uid", "namespace", "name", "kind", "attempt", "phase")
"""What an event stream says of its run."""


def _about(run: Run) -> dict[str, Any]:
    return {column: getattr(run, column) for column in _ABOUT}


def _finding(row: FindingRow, status: str | None = None, revision: int | None = None) -> dict[str, Any]:
    return {
        "id": row.id,
        "rule": row.rule,
        "severity": row.severity,
        "status": status or row.status,
        "revision": revision or row.revision,
        "root_cause": row.root_cause,
        "remediation": row.remediation,
        "doc_anchor": row.doc_anchor,
    }


def _frame(
    entry: TimelineEntryRow, run: Run | None, findings: dict[str, FindingRow], event_id: str | None
) -> str:
    """One timeline entry as an event; only the last of a poll's entries carries an id (below)."""
    detail = entry.detail or {}
    data: dict[str, Any] = {
        **(_about(run) if run is not None else {"uid": entry.run_uid}),
        "seq": entry.id,
        "at": entry.at.isoformat(),
        "source": entry.source,
        "summary": entry.summary,
    }
    kind = "timeline"
    if entry.source == "job":
        kind = "deleted" if entry.dedup_key.endswith(":deleted") else "phase"
        data["phase"], data["reason"] = detail.get("phase"), detail.get("reason")
    elif entry.source == "finding" and (row := findings.get(str(detail.get("finding")))) is not None:
        kind = "finding"
        data["finding"] = _finding(row, detail.get("status"), detail.get("revision"))
        if isinstance(detail.get("root_cause"), str):  # this revision's words, not the newest's
            data["finding"]["root_cause"] = detail["root_cause"]
    return event(event_id, kind, data)
