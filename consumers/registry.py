"""Every consumer role, by the name ``consume --only`` and the Deployments use for it.

The service and the CLI both read :data:`CONSUMERS`; adding a role means one module with an
``attach`` (see :mod:`consumers.wiring`) and one line here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from consumers import audit, history, kube_events
from consumers.notify import consumer as notify
from consumers.notify import dispatch
from consumers.rules import consumer as rules
from consumers.wiring import Attach

__all__ = ["CONSUMERS", "ConsumerRole"]


@dataclass(frozen=True)
class ConsumerRole:
    """One role: its name, what it does (the CLI's help), and how to attach it."""

    name: str
    help: str
    attach: Attach


_ROLES = (
    ConsumerRole("history", "observations and findings into the PostgreSQL history", history.attach),
    ConsumerRole("rules", "hang / OOM / MPI-failure rules into findings", rules.attach),
    ConsumerRole("audit", "audit records into the hash chain; SIEM export and retention", audit.attach),
    ConsumerRole("notify", "job transitions and findings into the delivery outbox", notify.attach),
    ConsumerRole("dispatch", "webhooks and email from the outbox (scales out)", dispatch.attach),
    ConsumerRole("k8s-events", "findings as Events on their jobs (if enabled)", kube_events.attach),
)

CONSUMERS: Mapping[str, ConsumerRole] = MappingProxyType({role.name: role for role in _ROLES})
