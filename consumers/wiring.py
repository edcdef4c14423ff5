"""What every consumer role is given and gives back: the one shape the registry wires.

A role's :data:`Attach` receives the process's :class:`Wiring` (settings, bus, database,
metrics, clock, and the Kubernetes gateway on demand) and returns a :class:`Role`: the
durable batch consumers it declares (:class:`~controller.bus.consuming.Durable`), if any, and
the background loops it runs beside them until told to stop (tickers, dispatchers,
exporters). Nothing else is shared between roles; they meet only on the bus and in the
database.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from controller.bus.client import NATS, JetStreamContext
from controller.bus.consuming import Durable
from controller.contract.clock import Clock, utcnow
from controller.contract.settings import Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics

if TYPE_CHECKING:  # imported by the roles that ask for it (Wiring.kube)
    from controller.kube.gateway import KubeGateway

__all__ = ["Attach", "Background", "Role", "Wiring"]

Background = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
"""A loop that runs until the event is set."""


@dataclass(frozen=True)
class Wiring:
    """What a consumer process offers each role it runs."""

    settings: Settings
    topology: Topology
    nc: NATS
    js: JetStreamContext
    engine: AsyncEngine
    metrics: PipelineMetrics
    kube: Callable[[], KubeGateway]
    """The Kubernetes gateway, built on first call (only roles that write to Kubernetes ask)."""
    clock: Clock = utcnow


@dataclass(frozen=True)
class Role:
    """A role ready to run: its durable consumers and its background loops."""

    durables: tuple[Durable[Any], ...] = field(default=())
    background: tuple[Background, ...] = field(default=())


class Attach(Protocol):
    """Prepares one role (declares what it needs on the bus) and returns it."""

    async def __call__(self, wiring: Wiring) -> Role: ...
