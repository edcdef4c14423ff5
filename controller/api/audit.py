"""Audit records: query, streaming export and chain verification (``/api/v1/audit…``).

Reads go through :mod:`controller.store.auditchain` and formats through :mod:`controller.store.auditformats`
(the exporters use the same ones). Authorization is the API's usual seam: a ``namespace``
filter needs read access to it (403), and without one the caller sees the namespaces
:func:`~controller.api.auth.visible_namespaces` allows. Records without a namespace (the
retention purges) and verification, which walks the one global chain, need access to every
namespace.

Times are ISO 8601 with a timezone; ``since`` is inclusive and ``until`` exclusive, on the
time the audited thing happened. Lists are newest first with an opaque ``cursor``; exports
are in chain order (oldest first), streamed page by page.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.auth import Principal, current_principal, require_namespace, visible_namespaces
from controller.api.deps import engine_of
from controller.contract.audit import Verb
from controller.store import auditchain as auditlog
from controller.store.auditchain import AuditFilter, StoredRecord
from controller.store.auditformats import EXPORT_FORMATS, ExportFormat

router = APIRouter(prefix="/api/v1/audit", tags=["audit"])

EXPORT_PAGE = 500
_CURSOR_PREFIX = "seq:"


def _encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"{_CURSOR_PREFIX}{seq}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError):
        text = ""
    seq = text.removeprefix(_CURSOR_PREFIX)
    if not text.startswith(_CURSOR_PREFIX) or not seq.isdigit():
        raise HTTPException(400, "cursor is not one this API handed out; pass next_cursor unchanged")
    return int(seq)


def _aware(name: str, value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise HTTPException(400, f"{name} needs a timezone, e.g. 2026-11-23T06:00:00Z")
    return value


async def audit_filter(
    request: Request,
    principal: Annotated[Principal, Depends(current_principal)],
    namespace: Annotated[str | None, Query(min_length=1, max_length=253)] = None,
    since: Annotated[datetime | None, Query(description="Inclusive; ISO 8601 with a timezone.")] = None,
    until: Annotated[datetime | None, Query(description="Exclusive; ISO 8601 with a timezone.")] = None,
    verb: Verb | None = None,
    user: Annotated[str | None, Query(min_length=1, description="Exact username.")] = None,
    uid: Annotated[str | None, Query(min_length=1, description="Job (run) uid.")] = None,
) -> AuditFilter:
    """The filters every audit route shares, checked and narrowed to what the caller may read."""
    since, until = _aware("since", since), _aware("until", until)
    if since is not None and until is not None and since >= until:
        raise HTTPException(400, f"since ({since.isoformat()}) must be before until ({until.isoformat()})")
    if namespace is not None:
        await require_namespace(request, principal, namespace)
        visible = None
    else:
        visible = await visible_namespaces(request, principal)
    return AuditFilter(
        namespace=namespace,
        namespaces=visible,
        since=since,
        until=until,
        verb=verb,
        username=user,
        object_uid=uid,
    )


Filter = Annotated[AuditFilter, Depends(audit_filter)]


@router.get("")
async def list_audit(
    request: Request,
    where: Filter,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: Annotated[str | None, Query(description="next_cursor of the previous page.")] = None,
) -> dict[str, Any]:
    """Audit records newest first, one page; ``next_cursor`` is null on the last page."""
    before = _decode_cursor(cursor) if cursor is not None else None
    async with engine_of(request).connect() as conn:
        rows = await auditlog.list_records(conn, where, limit, before)
    return {
        "items": [stored.export() for stored in rows],
        "next_cursor": _encode_cursor(rows[-1].seq) if len(rows) == limit else None,
    }


async def _rendered(
    engine: AsyncEngine, where: AuditFilter, render: Callable[[StoredRecord], bytes]
) -> AsyncIterator[bytes]:
    async for page in auditlog.pages(engine, where, EXPORT_PAGE):
        yield b"".join(render(stored) for stored in page)


@router.get("/export")
async def export_audit(
    request: Request,
    where: Filter,
    format: ExportFormat = "jsonl",
) -> StreamingResponse:
    """Every matching record in chain order, streamed: JSON Lines (re-verifiable) or CEF lines."""
    media_type, render = EXPORT_FORMATS[format]
    return StreamingResponse(
        _rendered(engine_of(request), where, render),
        media_type=media_type,
        headers={"content-disposition": f'attachment; filename="audit.{format}"'},
    )


@router.get("/verify")
async def verify_audit(
    request: Request, principal: Annotated[Principal, Depends(current_principal)]
) -> dict[str, Any]:
    """Walk the hash chain; ``broken`` names the first record where it does not hold."""
    if await visible_namespaces(request, principal) is not None:
        raise HTTPException(
            403, "verifying the audit chain needs read access to every namespace: the chain is global"
        )
    result = await auditlog.verify(engine_of(request))
    return {
        "ok": result.ok,
        "checked": result.checked,
        "first_seq": result.first_seq,
        "last_seq": result.last_seq,
        "head_hash": result.head_hash,
        "anchor": result.anchor,
        "broken": {"seq": result.broken.seq, "reason": result.broken.reason} if result.broken else None,
    }
