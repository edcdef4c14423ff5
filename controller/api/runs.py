"""Runs, their pods, timelines and findings (``/api/v1/runs…``), read from the history store."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request

from controller.api import models
from controller.api.deps import engine_of
from controller.api.paging import Cursor, Limit
from controller.api.params import (
    MAX_LABELS,
    Instant,
    JobName,
    Label,
    NamespaceQuery,
    UidPath,
    errors,
    labels_of,
)
from controller.api.routing import Caller, api_router
from controller.api.visible_runs import readable_run, run_page
from controller.contract.events import JobPhase
from controller.contract.kubeflow import JobKind
from controller.store import queries

__all__ = ["findings", "get_run", "list_runs", "router", "timeline"]

router = api_router("/api/v1", "runs", 400)


@router.get("/runs", responses=errors(403))
async def list_runs(
    request: Request,
    principal: Caller,
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
async def get_run(uid: UidPath, request: Request, principal: Caller) -> models.RunDetail:
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
async def timeline(uid: UidPath, request: Request, principal: Caller) -> models.Timeline:
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
async def findings(uid: UidPath, request: Request, principal: Caller) -> models.FindingList:
    """A run's findings, firing first."""
    async with engine_of(request).connect() as conn:
        await readable_run(conn, request, principal, uid)
        rows = await queries.run_findings(conn, uid)
    return models.FindingList(items=[models.Finding.model_validate(f) for f in rows])
