"""Watch only what the API server serves: API discovery at the start, and again now and then.

A cluster rarely runs every Kubeflow operator: one has mpi-operator alone, another the
training-operator and Kubeflow Trainer. A watch of a kind whose CRD is not installed would
answer 404 forever, so each job resource is asked for first (its group version's discovery
document, :meth:`controller.kube.gateway.KubeGateway.served`); those served are watched at
once, the others asked for again every ``discovery_s`` until they are served — a CRD
installed later is watched from then on, without a restart. Core resources (pods, events)
are always served.

Discovery that fails (no answer, 5xx after the gateway's retries, 403) does not hold a watch
back: the resource is watched all the same and the watch loop deals with what the server
answers, as it always did. Only a plain "not served" (404, or a group version without that
plural) waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from controller.contract.clock import pause
from controller.kube.errors import APIError
from controller.kube.resources import Resource

__all__ = ["ServedGateway", "follow_served"]

log = logging.getLogger(__name__)


class ServedGateway(Protocol):
    """What discovery needs of the Kubernetes gateway."""

    def served(self, resource: Resource) -> bool: ...


async def _served(gateway: ServedGateway, resource: Resource) -> bool:
    try:
        return await asyncio.to_thread(gateway.served, resource)
    except APIError as exc:
        log.warning("%s: discovery failed (%s); watching it all the same", resource, exc)
        return True


async def follow_served(
    gateway: ServedGateway,
    resources: Sequence[Resource],
    start: Callable[[Resource], None],
    interval_s: float,
    stop: asyncio.Event,
) -> None:
    """Call ``start`` once for each of ``resources`` as soon as the API server serves it: for
    those served now at once, for the others after the check (every ``interval_s``) that finds
    them served. Returns once every one is started, or when ``stop`` is set."""
    waiting = list(resources)
    told: set[Resource] = set()
    while waiting and not stop.is_set():
        for resource in list(waiting):
            if await _served(gateway, resource):
                if resource in told:
                    log.info("%s is served now; watching it", resource)
                waiting.remove(resource)
                start(resource)
            elif resource not in told:
                told.add(resource)
                log.info("%s is not served (CRD not installed); asking again every %gs", resource, interval_s)
        if waiting:
            await pause(stop, interval_s)
