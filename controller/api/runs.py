"""Runs, their pods, timelines and findings (``/api/v1/runs…``), read from the history store."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.api import models
from controller.api.auth import Principal, current_principal, require_namespace, visible_namespaces
from controller.api.deps import engine_of
from controller.api.params import (
    AUTH_ERRORS,
    BAD_REQUEST,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    NOT_FOUND,
    Cursor,
    Instant,
    Label,
    Limit,
    UidPath,
    decode_cursor,
    encode_cursor,
    known_query_only,
    labels_of,
)
from controller.contract.events import JobPhase
from controller.contract.kubeflow import JobKind
from controller.store import queries
from controller.store.models import Run

router = APIRouter(prefix="/api/v1", tags=["runs"], dependencies=[Depends(known_query_only)])


async def run_page(
    request: Request, principal: Principal, where: queries.RunFilter, limit: int, cursor: str | None
) -> models.RunPage:
    """One page of runs matching ``where`` that ``principal`` may see, and the next page's cursor."""
    before = decode_cursor(cursor)
    if where.namespace is not None:
        await require_namespace(request, principal, where.namespace)
    else:
        where = dataclasses.replace(where, namespaces=await visible_namespaces(request, principal))
    async with engine_of(request).connect() as conn:
        runs = await queries.list_runs(conn, where, limit + 1, before)
    page = runs[:limit]
    return models.RunPage(
        items=[models.RunSummary.model_validate(run) for run in page],
        next_cursor=encode_cursor(page[-1]) if len(runs) > limit else None,
    )


async def readable_run(conn: AsyncConnection, request: Request, principal: Principal, uid: str) -> Run:
    """The run ``uid`` if ``principal`` may read its namespace: 404 if there is none, 403 if not allowed."""
    run = await queries.get_run(conn, uid)
    if run is None:
        raise HTTPException(404, f"no run with uid {uid!r}")
    await require_namespace(request, principal, run.namespace)
    return run


@router.get("/runs", responses={**AUTH_ERRORS, **BAD_REQUEST})
async def list_runs(
    request: Request,
    principal: Annotated[Principal, Depends(current_principal)],
    namespace: Annotated[str | None, Query(pattern=DNS_LABEL, max_length=63)] = None,
    name: Annotated[str | None, Query(pattern=DNS_SUBDOMAIN, max_length=253)] = None,
    kind: JobKind | None = None,
    phase: JobPhase | None = None,
    label: Annotated[
        list[Label] | None, Query(description="`key=value`; repeat for several (all must match).")
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


@router.get("/runs/{uid}", responses={**AUTH_ERRORS, **BAD_REQUEST, **NOT_FOUND})
async def get_run(
    uid: UidPath, request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> models.RunDetail:
    """One run with its spec, conditions, pods and findings."""
    async with engine_of(request).connect() as conn:
        run = await readable_run(conn, request, principal, uid)
        pods = await queries.run_pods(conn, uid)
        findings = await queries.run_findings(conn, uid)
    return models.RunDetail.model_validate(
        {
            **models.RunSummary.model_validate(run).model_dump(),
            "spec": run.spec,
            "conditions": run.conditions,
            "pods": [models.Pod.model_validate(p) for p in pods],
            "findings": [models.Finding.model_validate(f) for f in findings],
        }
    )


@router.get("/runs/{uid}/timeline", responses={**AUTH_ERRORS, **BAD_REQUEST, **NOT_FOUND})
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
                uid=p.uid, name=p.name, role=p.role, index=p.index, states=by_pod.get(p.uid, [])
            )
            for p in pods
        ],
        events=[models.K8sEvent.model_validate(e) for e in events],
        findings=[models.Finding.model_validate(f) for f in findings],
    )


@router.get("/runs/{uid}/findings", responses={**AUTH_ERRORS, **BAD_REQUEST, **NOT_FOUND})
async def findings(
    uid: UidPath, request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> models.FindingList:
    """A run's findings, firing first."""
    async with engine_of(request).connect() as conn:
        await readable_run(conn, request, principal, uid)
        rows = await queries.run_findings(conn, uid)
    return models.FindingList(items=[models.Finding.model_validate(f) for f in rows])
