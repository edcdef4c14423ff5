"""The audit role: every audit record into the hash chain, lifecycle records from the watch
stream, the retention purge and the corroboration of admission records (``consumer``), and the
SIEM exporters beside them (``export``)."""

from consumers.audit import consumer, export
from consumers.wiring import Role, Wiring


async def attach(wiring: Wiring) -> Role:
    """Durables for the chain, and the exporters and purge as background loops."""
    settings = wiring.settings
    return Role(
        consumer.durables(
            wiring.topology, wiring.engine, wiring.js, wiring.clock, settings.nats.publish_retry_s
        ),
        (
            lambda stop: export.run_exporters(wiring.engine, settings.audit, stop, wiring.metrics.registry),
            lambda stop: consumer.run_retention(wiring.engine, settings.audit, stop, wiring.clock),
            lambda stop: consumer.run_corroboration(
                wiring.engine,
                settings.audit,
                stop,
                wiring.clock,
                consumer.CorroborationMetrics.on(wiring.metrics.registry),
            ),
        ),
    )
