"""Listening to a subject without JetStream: a core NATS subscription, its messages parsed as bus
events.

What a role hears this way is a hint that costs nothing to miss (the leader's progress probes,
which each watcher replica's log followers read to learn which runs went quiet): no stream, no
acknowledgement, no redelivery. :func:`listening` subscribes for the length of a ``with`` block,
parses each message (:func:`~controller.contract.events.parse_event`) and hands the event to the
role; a message that does not parse is dropped, and the subscription is undone on the way out,
also when NATS is away by then.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from controller.contract.events import BusEvent, parse_event

__all__ = ["listening"]

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def listening(
    nc: NATS, subject: str, hear: Callable[[BusEvent], Awaitable[None]]
) -> AsyncIterator[None]:
    """Hand every bus event published on ``subject`` to ``hear`` while inside (core NATS: what is
    published while no one listens is not heard)."""

    async def received(msg: Msg) -> None:
        try:
            event = parse_event(msg.data)
        except ValueError as exc:  # pydantic's ValidationError is one
            log.debug("%s: a message that is not a bus event dropped: %s", msg.subject, exc)
            return
        await hear(event)

    subscription = await nc.subscribe(subject, cb=received)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            await subscription.unsubscribe()
