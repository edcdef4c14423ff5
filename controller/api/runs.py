"""Runs, their pods, timelines and findings (``/api/v1/runs…``), read from the history store."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.api import models
from controller.api.auth import Principal, current_principal, may_read, require_namespace, visible_namespaces
from controller.api.deps import engine_of
from controller.api.paging import Cursor, Keyset, Limit, page_of
from controller.api.params import (
    AUTHENTICATED,
    MAX_LABELS,
    MAX_UID,
    UID,
    Instant,
    JobName,
    Label,
    NamespaceQuery,
    UidPath,
    errors,
    known_query_only,
    labels_of,
)
from controller.contract.events import JobPhase
from controller.contract.kubeflow import JobKind
from controller.store import queries
from controller.store.models import Run

router = APIRouter(
    prefix="/api/v1",
    tags=["runs"],
    dependencies=[Depends(known_query_only)],
    responses={**AUTHENTICATED, **errors(400)},
)


def _load_run_key(key: list[Any]) -> tuple[datetime, str]:
    created_at, uid = key
    when = datetime.fromisoformat(created_at)
    if when.tzinfo is None or not isinstance(uid, str) or len(uid) > MAX_UID or not re.fullmatch(UID, uid):
        raise ValueError("not a run position")
    return when, uid


RUNS = Keyset[tuple[datetime, str]]("runs", lambda key: [key[0].isoformat(), key[1]], _load_run_key)
"""Runs are ordered newest first by (created_at, uid)."""


async def run_page(
    request: Request, principal: Principal, where: queries.RunFilter, limit: int, cursor: str | None
) -> models.RunPage:
    """One page of runs matching ``where`` that ``principal`` may see, and the next page's cursor."""
    before = RUNS.decode(cursor)
    if where.namespace is not None:
        await require_namespace(request, principal, where.namespace)
    else:
        where = dataclasses.replace(where, namespaces=await visible_namespaces(request, principal))
    async with engine_of(request).connect() as conn:
        runs = await queries.list_runs(conn, where, limit + 1, before)
    page, next_cursor = page_of(runs, limit, RUNS, lambda run: (run.created_at, run.uid))
    return models.RunPage(
        items=[models.RunSummary.model_validate(run) for run in page], next_cursor=next_cursor
    )


async def readable_run(conn: AsyncConnection, request: Request, principal: Principal, uid: str) -> Run:
    """The run ``uid`` if ``principal`` may read its namespace; 404 otherwise, the same whether
    there is no such run or it is in a namespace the caller may not read."""
    run = await queries.get_run(conn, uid)
    if run is None or not await may_read(request, principal, run.namespace):
        raise HTTPException(404, f"no run with uid {uid!r}")
    return run


@router.get("/runs", responses=errors(403))
async def list_runs(
    request: Request,
    principal: Annotated[Principal, Depends(current_principal)],
    namespace: NamespaceQuery = None,
    name: Annotated[JobName | None, Query(description="Only jobs of this name.")] = None,
    kind: JobKind | None = None,
    phase: JobPhase | None = None,
    label: Annotated[
        list[Label] | None,
        Query(
            max_length=MAX_LABELS,
            description=f"`key=value`; repeat for several, at most {MAX_LABELS} (all must match).",
        ),
    ] = None,
    created_after: Annotated[Instant | None, Query(description="Created at or after (RFC 3339).")] = None,
    created_before: Annotated[Instant | None, Query(description="Created before (RFC 3339).")] = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> models.RunPage:
    """Runs newest first, filtered; only namespaces the caller may list MPIJobs/TrainJobs in."""
    where = queries.RunFilter(
        namespace=namespace,
        name=name,
        kind=kind,
        phase=phase,
        created_after=created_after,
        created_before=created_before,
        labels=labels_of(label or ()),
    )
    return await run_page(request, principal, where, limit, cursor)


@router.get("/runs/{uid}", responses=errors(404))
async def get_run(
    uid: UidPath, request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> models.RunDetail:
    """One run with its spec, conditions, pods and findings."""
    async with engine_of(request).connect() as conn:
        run = await readable_run(conn, request, principal, uid)
        pods = await queries.run_pods(conn, uid)
        findings = await queries.run_findings(conn, uid)
        usage = (await queries.run_usage(conn, [uid]))[uid]
    return models.RunDetail.model_validate(
        {
            **models.RunSummary.model_validate(run).model_dump(),
            "spec": run.spec,
            "manifest": run.manifest,
            "conditions": run.conditions,
            "pods": [models.Pod.model_validate(p) for p in pods],
            "findings": [models.Finding.model_validate(f) for f in findings],
            "usage": [
                models.PodUsage.model_validate(u).model_copy(update={"memory_peak": queries.memory_peak(u)})
                for u in usage
            ],
        }
    )


@router.get("/runs/{uid}/timeline", responses=errors(404))
async def timeline(
    uid: UidPath, request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> models.Timeline:
    """Phases, pod changes, Kubernetes events and findings in time order; and every pod's state history."""
    async with engine_of(request).connect() as conn:
        await readable_run(conn, request, principal, uid)
        entries = await queries.run_timeline(conn, uid)
        pods = await queries.run_pods(conn, uid)
        states = await queries.run_pod_states(conn, uid)
        events = await queries.run_events(conn, uid)
        findings = await queries.run_findings(conn, uid)
    by_pod: dict[str, list[models.PodStateEntry]] = {}
    for state in states:
        by_pod.setdefault(state.pod_uid, []).append(models.PodStateEntry.model_validate(state))
    return models.Timeline(
        uid=uid,
        entries=[models.TimelineEntry.model_validate(e) for e in entries],
        pods=[
            models.PodHistory(
                uid=p.uid,
                name=p.name,
                role=p.role,
                replica=p.replica,
                index=p.index,
                states=by_pod.get(p.uid, []),
            )
            for p in pods
        ],
        events=[models.K8sEvent.model_validate(e) for e in events],
        findings=[models.Finding.model_validate(f) for f in findings],
    )


@router.get("/runs/{uid}/findings", responses=errors(404))
async def findings(
    uid: UidPath, request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> models.FindingList:
    """A run's findings, firing first."""
    async with engine_of(request).connect() as conn:
        await readable_run(conn, request, principal, uid)
        rows = await queries.run_findings(conn, uid)
    return models.FindingList(items=[models.Finding.model_validate(f) for f in rows])
