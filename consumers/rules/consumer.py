"""The rules role: bus events in, findings out, at least once, partitioned across replicas.

:func:`attach` starts one :class:`~consumers.rules.replica.RulesReplica`, which claims its share
of the partitions and runs a :class:`~consumers.rules.service.RulesService` (engine, outbox,
warm start, snapshot) per partition; :mod:`consumers.rules.service` and
:mod:`consumers.rules.replica` say how.
"""

from __future__ import annotations

import logging

from consumers.rules import logreader
from consumers.rules.replica import RulesReplica
from consumers.wiring import Role, Wiring
from controller.bus.publishing import Publisher

__all__ = ["attach"]

log = logging.getLogger(__name__)


async def attach(wiring: Wiring) -> Role:
    """The rules role: one replica of the partitioned consumer, claiming its share before it
    returns, and the live log reader (:mod:`consumers.rules.logreader`) beside it."""
    settings = wiring.settings
    replica = RulesReplica(
        wiring.topology,
        settings.consumer,
        settings.rules,
        wiring.nc,
        wiring.metrics,
        wiring.clock,
        replicas=settings.nats.replicas,
        publish_retry_s=settings.nats.publish_retry_s,
    )
    await replica.start()
    log.info("rules replica %s runs partitions %s", replica.replica, sorted(replica.claimed))
    reader = logreader.LogReader(
        Publisher(wiring.js, wiring.topology, settings.nats.publish_retry_s),
        wiring.clock,
        settings.rules.live_activity_s,
    )
    return Role(durables=(logreader.durable(reader),), background=(replica.run,))
