"""What every JSON router of the API starts from, written once.

:func:`api_router` is a router under ``prefix``, tagged ``tag`` in the OpenAPI schema, whose
routes refuse query parameters they do not declare (:func:`~controller.api.params.known_query_only`)
and document what any authenticated route may answer (:data:`~controller.api.params.AUTHENTICATED`)
besides the given error statuses. :data:`Caller` is the parameter a route takes for who is
asking (:func:`~controller.api.auth.current_principal`: 401 without a token nobody accepts);
:func:`listed_namespaces` is where a list route may look for its caller.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from controller.api.auth import Principal, current_principal, require_namespace, visible_namespaces
from controller.api.params import AUTHENTICATED, errors, known_query_only

__all__ = ["Caller", "api_router", "listed_namespaces"]

Caller = Annotated[Principal, Depends(current_principal)]
"""The authenticated caller of a route."""


def api_router(prefix: str, tag: str, *statuses: int) -> APIRouter:
    """A router of the API's ``tag`` routes under ``prefix``, each documented to answer ``statuses``
    besides authentication's."""
    return APIRouter(
        prefix=prefix,
        tags=[tag],
        dependencies=[Depends(known_query_only)],
        responses={**AUTHENTICATED, **errors(*statuses)},
    )


async def listed_namespaces(
    request: Request, principal: Principal, namespace: str | None
) -> frozenset[str] | None:
    """The namespaces a list may show ``principal``: the ``namespace`` they named (403 unless they
    may read it: naming it reveals nothing of what is in it), or without one every namespace they
    may read (``None``: all of them)."""
    if namespace is not None:
        await require_namespace(request, principal, namespace)
        return frozenset({namespace})
    return await visible_namespaces(request, principal)
