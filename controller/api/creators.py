"""A subscription's creator, as their access is asked about for as long as it lives: whom it is
re-checked as (:func:`creator_of`, the creator as the API authenticated them at creation) and why
it is suspended once they lost access (:func:`lost_access`). Shared by the notifications API
(:mod:`controller.api.notifications`, which resumes a subscription only for a creator who may read
again) and the re-checks (:mod:`controller.api.rechecks`).
"""

from __future__ import annotations

from controller.api.access import Principal
from controller.store.subscriptions import SubscriptionRecord

__all__ = ["creator_of", "lost_access"]


def creator_of(sub: SubscriptionRecord) -> Principal:
    """Whom ``sub`` is re-checked as: its creator as the API authenticated them."""
    return Principal.recorded(sub.created_by, sub.creator)


def lost_access(sub: SubscriptionRecord) -> str:
    """Why ``sub`` is suspended (its ``disabled_reason``)."""
    where = f"namespace {sub.namespace!r}" if sub.namespace is not None else "every namespace"
    return (
        f"suspended: its creator {sub.created_by} may no longer list MPIJobs or TrainJobs in {where}; "
        "it resumes by itself once they may again"
    )
