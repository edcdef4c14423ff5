"""Access reviews by the Kubernetes API server: whose token is this, may they list (or update) jobs there.

The API's :class:`~controller.api.access.AccessReviewer`, answered by the cluster itself:

- a ``TokenReview`` (``authentication.k8s.io/v1``) turns a bearer token into a user, its uid,
  groups and extra attributes — the same identity ``kubectl`` would act as, less the attributes
  that name the token itself (:data:`CREDENTIAL_EXTRA`);
- a ``SubjectAccessReview`` (``authorization.k8s.io/v1``) asks whether that user may ``list``
  MPIJobs, else TrainJobs, in a namespace (or, with no namespace, in every namespace), so
  the API shows exactly the namespaces whose jobs the user could already read with kubectl;
  the same review with verb ``update`` decides who may change a notification subscription
  someone else created in that namespace, and with verb ``create`` who may subscribe there.

Both go through :class:`~controller.kube.gateway.KubeGateway` (this module never imports
``kubernetes``), from a thread; the controller's service account needs ``create`` on
``tokenreviews`` and ``subjectaccessreviews`` (``deploy/base/rbac.yaml``). A call that fails
— the API server is down, or RBAC forbids the review — is neither a yes nor a no: it raises
:class:`~controller.api.access.ReviewUnavailableError`, which the API answers with 503.
Answers are not cached here; the API wraps this in :class:`~controller.api.access.CachedAccess`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from controller.contract.access import Principal, ReviewUnavailableError
from controller.kube.errors import APIError
from controller.kube.gateway import KubeGateway
from controller.kube.resources import JOB_RESOURCES, RawObject, Resource

__all__ = ["CREDENTIAL_EXTRA", "LISTED", "SUBJECT_ACCESS_REVIEWS", "TOKEN_REVIEWS", "KubeAccessReviewer"]

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
SUBJECT_ACCESS_REVIEWS = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False
)
LISTED: tuple[Resource, ...] = tuple(JOB_RESOURCES.values())
"""A namespace is readable (changeable) if the user may list (update) any kind of job in it (asked
in the registry's order, MPIJobs first: most users are answered by the first review)."""
CREDENTIAL_EXTRA = frozenset(
    f"authentication.kubernetes.io/{key}"
    for key in ("credential-id", "pod-name", "pod-uid", "node-name", "node-uid")
)
"""Extra attributes of a TokenReview that name the credential, not the user: a service-account
token's id and the pod (and node) it was issued for. Each freshly minted token has its own, so
they are left out of the principal: every token of one service account is one identity, whose
access decisions are reviewed and cached once. RBAC never reads extra attributes; other ones
(an OpenShift token's scopes) are kept and sent with every SubjectAccessReview."""


class KubeAccessReviewer:
    """TokenReview and SubjectAccessReview through one gateway."""

    def __init__(self, gateway: KubeGateway, audiences: Sequence[str] = ()) -> None:
        """``audiences``: the token audiences to accept; empty accepts the API server's own. With
        audiences, an answer must name one of them in ``status.audiences`` (an empty one means the
        token is valid for the API server, as the TokenReview API documents)."""
        self._gateway = gateway
        self._audiences = list(audiences)

    async def review_token(self, token: str) -> Principal | None:
        if not token:
            return None
        spec: dict[str, Any] = {"token": token}
        if self._audiences:
            spec["audiences"] = self._audiences
        status = await self._review(TOKEN_REVIEWS, spec)
        user = status.get("user") or {}
        if not status.get("authenticated") or not user.get("username"):
            return None
        if self._audiences and not set(status.get("audiences") or ()) & set(self._audiences):
            return None  # an authenticator blind to audiences: the token may be the API server's own
        return Principal(
            username=str(user["username"]),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            uid=str(user.get("uid") or ""),
            extra=tuple(
                sorted(
                    (str(k), tuple(map(str, v)))
                    for k, v in (user.get("extra") or {}).items()
                    if str(k) not in CREDENTIAL_EXTRA
                )
            ),
        )

    async def can_list(self, principal: Principal, namespace: str | None) -> bool:
        return await self._allowed("list", principal, namespace)

    async def can_update(self, principal: Principal, namespace: str | None) -> bool:
        return await self._allowed("update", principal, namespace)

    async def can_subscribe(self, principal: Principal, namespace: str | None) -> bool:
        """Subscribing needs ``create`` on jobs there, as a static token needs ``manage``: a
        read-only user (the ``view`` role) could otherwise fill the namespace's subscription quota."""
        return await self._allowed("create", principal, namespace)

    async def can_read_logs(self, principal: Principal, namespace: str) -> bool:
        """``get`` on ``pods/log`` there, as ``kubectl logs`` needs."""
        attributes = {"verb": "get", "group": "", "resource": "pods", "subresource": "log"}
        return await self._review_allows(principal, {**attributes, "namespace": namespace})

    async def _allowed(self, verb: str, principal: Principal, namespace: str | None) -> bool:
        """Whether a SubjectAccessReview allows ``verb`` on a kind of job in ``namespace``."""
        for resource in LISTED:
            attributes = {"verb": verb, "group": resource.group, "resource": resource.plural}
            if namespace is not None:
                attributes["namespace"] = namespace
            if await self._review_allows(principal, attributes):
                return True
        return False

    async def _review_allows(self, principal: Principal, attributes: dict[str, str]) -> bool:
        """Whether a SubjectAccessReview of ``attributes`` for ``principal`` allows it."""
        spec: dict[str, Any] = {
            "user": principal.username,
            "groups": list(principal.groups),
            "resourceAttributes": attributes,
        }
        if principal.uid:
            spec["uid"] = principal.uid
        if principal.extra:
            spec["extra"] = {key: list(values) for key, values in principal.extra}
        status = await self._review(SUBJECT_ACCESS_REVIEWS, spec)
        return bool(status.get("allowed")) and not status.get("denied")

    async def _review(self, resource: Resource, spec: dict[str, Any]) -> dict[str, Any]:
        """POST a review and return its ``status``; any failure is :class:`ReviewUnavailableError`."""
        body: RawObject = {"apiVersion": resource.api_version, "kind": resource.kind, "spec": spec}
        try:
            answer = await asyncio.to_thread(self._gateway.create, resource, None, body)
        except APIError as exc:
            raise ReviewUnavailableError(f"{resource.kind} failed: {exc}") from exc
        status = answer.get("status")
        return status if isinstance(status, dict) else {}
