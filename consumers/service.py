"""The one place that runs consumer roles on a broker until told to stop.

Which roles run is the caller's choice (``consume --only``; all of them by default, as
``up`` runs them). How each role scales: ``history`` horizontally (idempotent writes);
``rules`` horizontally by partitions: the jobs are split into ``rules_partitions`` partitions
by a stable hash of namespace/job, each replica claims a fair share under leases in a JetStream
key-value bucket and takes over the partitions of a replica that stops renewing them, and each
partition's state lives in a snapshot bucket, so a restart or a takeover replays only the tail
of the JOBS stream (``consumers/rules/replica.py``); ``audit``
appends under an advisory lock and runs the SIEM exporters and the retention purge beside
its subscribers; ``notify`` horizontally (the newest observation of a job announces every
transition it implies, and findings are handed out one at a time); ``dispatch`` horizontally
(claims are leases, and the outbox wakes dispatchers in any process through PostgreSQL
``NOTIFY``); ``k8s-events`` horizontally (one shared durable).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.registry import CONSUMERS
from consumers.wiring import Wiring
from controller.bus.client import NATS
from controller.bus.consuming import open_durables, run_durable
from controller.bus.streams import connect, disconnect
from controller.contract.phases import Phases, process_age
from controller.contract.settings import NatsSettings, Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics

if TYPE_CHECKING:  # the Kubernetes client (0.2 s of CPU) only for the roles that ask
    from controller.kube.gateway import KubeGateway

log = logging.getLogger(__name__)


async def run_consumers(
    nats_url: str,
    topology: Topology,
    settings: Settings,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    stop: asyncio.Event,
    started: asyncio.Event | None = None,
    only: Collection[str] = tuple(CONSUMERS),
    kube: Callable[[], KubeGateway] | None = None,
    nats_for: Callable[[str], NatsSettings] | None = None,
) -> None:
    """Consume until ``stop`` is set; streams must exist (:func:`controller.bus.streams.ensure_streams`).

    All roles share one connection, as ``settings.nats``; with ``nats_for`` (role → the settings
    of its identity: the embedded NATS, or ``MPIJC_NATS__ROLE_PASSWORD_FILES``), each role has its
    own connection, as its own identity."""
    unknown = set(only) - set(CONSUMERS)
    if unknown:
        raise ValueError(f"unknown consumers {sorted(unknown)}; choose from {list(CONSUMERS)}")
    names = [name for name in CONSUMERS if name in only]
    groups = [(settings.nats, names)] if nats_for is None else [(nats_for(name), [name]) for name in names]
    connections: list[NATS] = []
    loops: list[asyncio.Task[None]] = []
    log.info("consumers %s: starting at +%.3fs of the process", ", ".join(names), process_age())
    phases = Phases()
    try:
        for nats, roles in groups:
            nc = await connect(nats_url, "mpijc-consumers", nats)
            connections.append(nc)
            phases.mark(f"connect {'+'.join(roles)}")
            wiring = Wiring(
                settings,
                topology,
                nc,
                nc.jetstream(),
                engine,
                metrics,
                kube or (lambda: _gateway(settings)),
            )
            for name in roles:
                importlib.import_module(CONSUMERS[name].module)
                phases.mark(f"import {name}")
                role = await CONSUMERS[name].attach(wiring)
                phases.mark(f"attach {name}")
                loops += [asyncio.create_task(loop(stop), name=name) for loop in role.background]
                durables = await open_durables(
                    nc, topology, settings.consumer, role.durables, metrics, settings.nats.publish_retry_s
                )
                phases.mark(f"open durables {name}")
                for opened in durables:
                    loops.append(asyncio.create_task(run_durable(opened, stop), name=opened.puller.durable))
        log.info("consumers running: %s (%s)", ", ".join(names), phases)
        if started:
            started.set()
        await _until_stopped_or_failed(stop, loops)
    finally:  # stopping, or failing to start: either way nothing may be left running
        stop.set()
        await asyncio.gather(*loops, return_exceptions=True)
        for nc in connections:
            await disconnect(nc)


async def _until_stopped_or_failed(stop: asyncio.Event, loops: list[asyncio.Task[None]]) -> None:
    """Until ``stop`` is set. A loop (a durable's, a dispatcher, a rules replica, an exporter…)
    that raises takes the process down with it (its supervisor restarts it) rather than
    leaving its role silently undone; one that returns had nothing to do (no retention
    configured)."""
    stopping = asyncio.create_task(stop.wait())
    watched: set[asyncio.Task[Any]] = {stopping, *loops}
    try:
        while not stop.is_set():
            done, watched = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                failure = None if task.cancelled() else task.exception()
                if failure is not None and not stop.is_set():
                    log.error("consumer loop %s failed: %r; stopping the process", task.get_name(), failure)
                    raise RuntimeError(f"consumer loop {task.get_name()} failed: {failure!r}") from failure
    finally:
        stopping.cancel()


def _gateway(settings: Settings) -> KubeGateway:
    """The Kubernetes gateway of ``settings``, its client imported now: only the roles that write to
    Kubernetes ask (``k8s-events``)."""
    from controller.kube.gateway import KubeGateway

    return KubeGateway.from_settings(settings.kube)
