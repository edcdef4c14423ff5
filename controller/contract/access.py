"""Who a caller is, and the questions the API asks about them: the authorization contract.

:class:`AccessReviewer` is implemented by the API (static tokens, open access, a cache) and
by the Kubernetes gateway (TokenReview + SubjectAccessReview), so neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["AccessReviewer", "Principal", "ReviewUnavailableError"]


class ReviewUnavailableError(Exception):
    """The reviewer could not answer (the Kubernetes API did not): neither yes nor no."""


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: a user (or service account) name, its uid and groups."""

    username: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def identity(self) -> dict[str, Any]:
        """Everything but the username, as JSON: what a subscription keeps of its creator to
        ask about them again later (:meth:`recorded` reads it back)."""
        return {"uid": self.uid, "groups": list(self.groups), "extra": {k: list(v) for k, v in self.extra}}

    @classmethod
    def recorded(cls, username: str, identity: Mapping[str, Any] | None) -> Principal:
        """The principal :meth:`identity` recorded for ``username``; ``None`` (nothing was
        recorded): the username alone, without groups."""
        if not identity:
            return cls(username)
        extra = identity.get("extra") or {}
        return cls(
            username=username,
            groups=tuple(str(g) for g in identity.get("groups") or ()),
            uid=str(identity.get("uid") or ""),
            extra=tuple(sorted((str(k), tuple(str(v) for v in values)) for k, values in extra.items())),
        )


class AccessReviewer(Protocol):
    """Who is asking, what may they read, what may they change.

    Implementations: ``controller.api.access`` and ``controller.kube.reviews``.
    """

    async def review_token(self, token: str) -> Principal | None:
        """The principal ``token`` authenticates, or ``None`` if it authenticates nobody (or is empty).

        Raises :class:`ReviewUnavailableError` when it cannot tell.
        """
        ...

    async def can_list(self, principal: Principal, namespace: str | None) -> bool:
        """Whether ``principal`` may list MPIJobs or TrainJobs in ``namespace`` (``None``: in all).

        Raises :class:`ReviewUnavailableError` when it cannot tell.
        """
        ...

    async def can_update(self, principal: Principal, namespace: str | None) -> bool:
        """Whether ``principal`` may update MPIJobs or TrainJobs in ``namespace`` (``None``: in all).

        Asked before someone changes or deletes a notification subscription they did not
        create. Raises :class:`ReviewUnavailableError` when it cannot tell.
        """
        ...

    async def can_subscribe(self, principal: Principal, namespace: str | None) -> bool:
        """Whether ``principal`` may create notification subscriptions in ``namespace`` (``None``:
        cluster-wide) and change their own there: ``False`` for a read-only caller.

        Raises :class:`ReviewUnavailableError` when it cannot tell.
        """
        ...

    async def can_read_logs(self, principal: Principal, namespace: str) -> bool:
        """Whether ``principal`` may read container logs in ``namespace`` (``get pods/log``),
        asked besides :meth:`can_list` before a run's logs are served.

        Raises :class:`ReviewUnavailableError` when it cannot tell.
        """
        ...
