"""Who is asking, and which namespaces they may read (the seam every route goes through).

Placeholder until authentication lands: everyone is ``anonymous`` and may read every
namespace. Routes must already go through this module, so that switching on bearer tokens
(Kubernetes TokenReview in a cluster, static tokens locally) and SubjectAccessReview-based
authorization changes this module only:

- ``principal: Annotated[Principal, Depends(current_principal)]`` on every route;
- ``await require_namespace(request, principal, namespace)`` before returning data of one
  namespace (raises 403);
- ``await visible_namespaces(request, principal)`` to filter lists (``None`` = all).
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    username: str
    groups: tuple[str, ...] = ()


async def current_principal(request: Request) -> Principal:
    """The caller of ``request``."""
    return Principal("anonymous")


async def require_namespace(request: Request, principal: Principal, namespace: str) -> None:
    """Raise ``HTTPException(403)`` unless ``principal`` may read ``namespace``."""
    return None


async def visible_namespaces(request: Request, principal: Principal) -> frozenset[str] | None:
    """Namespaces ``principal`` may read; ``None`` means all of them."""
    return None
