"""How much each stream holds and how far behind each of its durable consumers is: JetStream's
own account, read through the answering door (:func:`controller.bus.answering.until_answered`).

The API's ``/metrics`` reads it at each scrape (cached for a while by its collector); a JetStream
leader election in progress is asked again for a few seconds rather than failing the scrape.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from dataclasses import dataclass

from nats.js import JetStreamContext

from controller.bus.answering import until_answered

__all__ = ["SCRAPE_WITHIN_S", "ConsumerBacklog", "StreamBacklog", "backlog"]

SCRAPE_WITHIN_S = 5.0
"""How long a scrape's questions are asked again: within a Prometheus scrape's default timeout."""


@dataclass(frozen=True, slots=True)
class ConsumerBacklog:
    """One durable consumer's standing."""

    name: str
    pending: int
    """Messages in the stream it has not been delivered yet."""
    ack_pending: int
    """Messages delivered and not acknowledged yet."""
    redelivered: int
    """Unacknowledged messages delivered more than once."""


@dataclass(frozen=True, slots=True)
class StreamBacklog:
    """One stream: the messages it keeps and its consumers."""

    name: str
    messages: int
    consumers: list[ConsumerBacklog]


async def backlog(
    js: JetStreamContext, streams: Collection[str], within_s: float = SCRAPE_WITHIN_S
) -> list[StreamBacklog]:
    """The streams among ``streams`` that exist, by name, with their consumers."""
    infos = await until_answered(js.streams_info, "streams info", within_s=within_s)
    found = sorted(
        (info.config.name, info.state.messages)
        for info in infos
        if info.config.name is not None and info.config.name in streams
    )
    out = []
    for name, messages in found:
        consumers = await until_answered(
            functools.partial(js.consumers_info, name), f"consumers of {name}", within_s=within_s
        )
        out.append(
            StreamBacklog(
                name,
                messages,
                [
                    ConsumerBacklog(
                        c.name or "",
                        c.num_pending or 0,
                        c.num_ack_pending or 0,
                        c.num_redelivered or 0,
                    )
                    for c in consumers
                ],
            )
        )
    return out
