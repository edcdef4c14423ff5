"""Audit records: query, streaming export and chain verification (``/api/v1/audit…``).

Reads go through :mod:`controller.store.auditchain` and formats through :mod:`controller.store.auditformats`
(the exporters use the same ones). Authorization is the API's usual seam: a ``namespace``
filter needs read access to it (403, whether or not it holds records), and without one the
caller sees the namespaces :func:`~controller.api.routing.listed_namespaces` allows. Records
without a namespace (the retention purges) and verification, which walks the one global
chain, need access to every namespace.

Times are RFC 3339 with an offset; ``since`` is inclusive and ``until`` exclusive, on the
time the audited thing happened. Lists are newest first, paged as every list is
(:mod:`controller.api.paging`); exports are in chain order (oldest first), streamed page by page.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request
from fastapi.responses import StreamingResponse
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api import models
from controller.api.auth import may_read
from controller.api.deps import engine_of
from controller.api.paging import Cursor, Limit, by_sequence, page_of
from controller.api.params import Instant, NamespaceQuery, Uid, Username
from controller.api.routing import Caller, api_router, listed_namespaces
from controller.contract.audit import AuditVerb
from controller.store import auditchain as auditlog
from controller.store import auditformats, auditverification, corroboration
from controller.store.auditchain import AuditFilter, StoredRecord
from controller.store.auditformats import EXPORT_FORMATS, ExportFormat, Render

router = api_router("/api/v1/audit", "audit", 400, 403)

EXPORT_PAGE = 500


AUDIT = by_sequence("audit")
"""Audit records are ordered newest first by their place in the chain."""


async def audit_filter(
    request: Request,
    principal: Caller,
    namespace: NamespaceQuery = None,
    since: Annotated[Instant | None, Query(description="Inclusive; RFC 3339 with an offset.")] = None,
    until: Annotated[Instant | None, Query(description="Exclusive; RFC 3339 with an offset.")] = None,
    verb: AuditVerb | None = None,
    user: Annotated[Username | None, Query(description="Exact username.")] = None,
    uid: Annotated[Uid | None, Query(description="Job (run) uid.")] = None,
) -> AuditFilter:
    """The filters every audit route shares, checked and narrowed to what the caller may read."""
    if since is not None and until is not None and since >= until:
        raise HTTPException(400, f"since ({since.isoformat()}) must be before until ({until.isoformat()})")
    return AuditFilter(
        namespace=namespace,
        namespaces=await listed_namespaces(request, principal, namespace),
        since=since,
        until=until,
        verb=verb,
        username=user,
        object_uid=uid,
    )


Filter = Annotated[AuditFilter, Depends(audit_filter)]


@router.get("")
async def list_audit(
    request: Request, where: Filter, limit: Limit = 100, cursor: Cursor = None
) -> models.AuditPage:
    """Audit records newest first, one page; ``next_cursor`` is null on the last page."""
    before = AUDIT.decode(cursor)
    async with engine_of(request).connect() as conn:
        rows = await auditlog.list_records(conn, where, limit + 1, before)
        page, next_cursor = page_of(rows, limit, AUDIT, lambda stored: stored.seq)
        verdicts = await corroboration.verdicts(conn, [stored.seq for stored in page])
    items = [_link(stored, verdicts.get(stored.seq)) for stored in page]
    return models.AuditPage(items=items, next_cursor=next_cursor)


def _link(stored: StoredRecord, verdict: corroboration.CorroborationVerdict | None) -> models.AuditLink:
    """The link and, for an admission record, how far its claim is borne out (``pending``: not yet)."""
    standing = auditformats.corroboration(stored, verdict)
    return models.AuditLink.model_validate(
        {
            **stored.export(),
            "corroboration": standing["status"] if standing else None,
            "corroboration_detail": standing["detail"] if standing else None,
        }
    )


async def _rendered(engine: AsyncEngine, where: AuditFilter, render: Render) -> AsyncIterator[bytes]:
    async for page in auditlog.pages(engine, where, EXPORT_PAGE):
        async with engine.connect() as conn:
            found = await corroboration.verdicts(conn, [stored.seq for stored in page])
        yield b"".join(render(stored, found.get(stored.seq)) for stored in page)


@router.get(
    "/export",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {media_type: {} for media_type, _ in EXPORT_FORMATS.values()},
            "description": "Every matching record in chain order, one per line.",
        }
    },
)
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
async def verify_audit(request: Request, principal: Caller) -> models.ChainVerification:
    """Walk the hash chain; ``broken`` names the first record where it does not hold."""
    if not await may_read(request, principal, None):
        raise HTTPException(
            403, "verifying the audit chain needs read access to every namespace: the chain is global"
        )
    result = await auditverification.verify(engine_of(request))
    return models.ChainVerification.model_validate(result, from_attributes=True)
