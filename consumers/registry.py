"""Every consumer role, by the name ``consume --only`` and the Deployments use for it.

The service and the CLI both read :data:`CONSUMERS`; adding a role means one module with an
``attach`` (see :mod:`consumers.wiring`) and one line here. A role's module is imported only
when the role runs, so a process starts with what it runs and no more (the watcher imports no
consumer, ``consume --only rules`` neither the audit chain nor the dispatcher's HTTP and SMTP).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from consumers.wiring import Attach, Role, Wiring

__all__ = ["CONSUMERS", "ConsumerRole"]


@dataclass(frozen=True)
class ConsumerRole:
    """One role: its name, what it does (the CLI's help), and the module that attaches it."""

    name: str
    help: str
    module: str

    async def attach(self, wiring: Wiring) -> Role:
        """Import the role's module and attach the role to ``wiring``."""
        attach: Attach = importlib.import_module(self.module).attach
        return await attach(wiring)


_ROLES = (
    ConsumerRole("history", "observations and findings into the PostgreSQL history", "consumers.history"),
    ConsumerRole("rules", "hang / OOM / MPI-failure rules into findings", "consumers.rules.consumer"),
    ConsumerRole("audit", "audit records into the hash chain; SIEM export and retention", "consumers.audit"),
    ConsumerRole(
        "notify", "job transitions and findings into the delivery outbox", "consumers.notify.consumer"
    ),
    ConsumerRole("dispatch", "webhooks and email from the outbox (scales out)", "consumers.notify.dispatch"),
    ConsumerRole("k8s-events", "findings as Events on their jobs (if enabled)", "consumers.kube_events"),
)

CONSUMERS: Mapping[str, ConsumerRole] = MappingProxyType({role.name: role for role in _ROLES})
