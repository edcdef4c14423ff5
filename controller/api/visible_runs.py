"""The runs a caller may see, as every router that reads runs asks for them.

:func:`readable_run` is one run, 404 alike whether it does not exist or is in a namespace the
caller may not read (a 403 would confirm it exists); :func:`run_page` is one page of runs matching
a filter, in the namespaces the caller may list (403 for one named they may not), ordered as
:data:`RUNS` says.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Any

from fastapi import HTTPException, Request
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.api import models
from controller.api.auth import Principal, may_read
from controller.api.deps import engine_of
from controller.api.paging import Keyset, page_of
from controller.api.params import MAX_UID, UID
from controller.api.routing import listed_namespaces
from controller.store import queries
from controller.store.models import Run

__all__ = ["RUNS", "readable_run", "run_page"]


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
    where = dataclasses.replace(
        where, namespaces=await listed_namespaces(request, principal, where.namespace)
    )
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
