"""Runs, their pods and timelines (``/api/v1/runs…``); reads go through :mod:`controller.queries`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from controller import queries
from controller.api.auth import Principal, current_principal, require_namespace, visible_namespaces
from controller.api.deps import engine_of

router = APIRouter(prefix="/api/v1", tags=["runs"])

RUN_FIELDS = (
    "uid",
    "kind",
    "namespace",
    "name",
    "attempt",
    "previous_uid",
    "phase",
    "created_at",
    "started_at",
    "finished_at",
    "deleted_at",
    "spec",
    "labels",
    "conditions",
)
POD_FIELDS = ("uid", "name", "role", "index", "phase", "node", "reason", "restart_count", "containers")


def _fields(row: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(row, name) for name in names}


@router.get("/runs")
async def list_runs(
    request: Request,
    principal: Annotated[Principal, Depends(current_principal)],
    namespace: str | None = None,
    name: str | None = None,
    kind: str | None = None,
    phase: str | None = None,
    created_after: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Runs newest first, filtered."""
    if namespace is not None:
        await require_namespace(request, principal, namespace)
    allowed = await visible_namespaces(request, principal)
    where = queries.RunFilter(
        namespace=namespace, name=name, kind=kind, phase=phase, created_after=created_after
    )
    async with engine_of(request).connect() as conn:
        runs = await queries.list_runs(conn, where, limit)
    return {"items": [_fields(r, RUN_FIELDS) for r in runs if allowed is None or r.namespace in allowed]}


@router.get("/runs/{uid}")
async def get_run(
    uid: str, request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> dict[str, Any]:
    """One run with its pods and findings."""
    async with engine_of(request).connect() as conn:
        run = await queries.get_run(conn, uid)
        if run is None:
            raise HTTPException(404, f"no run with uid {uid!r}")
        await require_namespace(request, principal, run.namespace)
        pods = await queries.run_pods(conn, uid)
        findings = await queries.run_findings(conn, uid)
    return {
        **_fields(run, RUN_FIELDS),
        "pods": [_fields(p, POD_FIELDS) for p in pods],
        "findings": [{c.name: getattr(f, c.name) for c in f.__table__.columns} for f in findings],
    }


@router.get("/runs/{uid}/timeline")
async def timeline(
    uid: str, request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> dict[str, Any]:
    """A run's timeline: phases, pod changes, Kubernetes events and findings, in time order."""
    async with engine_of(request).connect() as conn:
        run = await queries.get_run(conn, uid)
        if run is None:
            raise HTTPException(404, f"no run with uid {uid!r}")
        await require_namespace(request, principal, run.namespace)
        entries = await queries.run_timeline(conn, uid)
    return {
        "items": [{"at": e.at, "source": e.source, "summary": e.summary, "detail": e.detail} for e in entries]
    }
