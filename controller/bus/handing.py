"""Protocol commands handed to nats-py's client in one write, as its own publishes would be.

A batch of publishes (the watcher's events) or of acknowledgements (a settled batch) costs the
client its checks, a command and a flush request per message; written as one run of the
commands its ``publish`` would have written for each, they cost that once per batch. Both
callers build their commands (:mod:`controller.bus.publishing`, :mod:`controller.bus.settling`)
and hand them over here, only where the client would simply have taken each publish
(:func:`takes_at_once`, :func:`sendable`); otherwise they publish one by one as before. This
leans on the client's internals (nats-py pinned in ``requirements.lock``): the tests in
``tests/bus`` compare the bytes with the client's own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nats.aio.client import Client as NATS

__all__ = ["hand_over", "sendable", "takes_at_once"]

_SPACE = re.compile(r"\s")


def takes_at_once(nc: NATS) -> bool:
    """Whether the client would write a publish now: connected and not draining (else it
    buffers it for a reconnect, or refuses it)."""
    return nc.is_connected and not nc.is_draining_pubs


def sendable(texts: Iterable[str]) -> bool:
    """Whether every subject or reply of ``texts`` is one the client sends as it is: none
    empty, none with a space or line break (which it refuses or rewrites)."""
    texts = list(texts)
    return all(texts) and not _SPACE.search("".join(texts))


async def hand_over(nc: NATS, commands: bytes, messages: int, payload_bytes: int) -> None:
    """Give the client ``commands`` (``messages`` publishes carrying ``payload_bytes``) as its own
    publishes would have: pending, counted, and the flusher asked to write them."""
    nc.stats["out_msgs"] += messages
    nc.stats["out_bytes"] += payload_bytes
    await nc._send_command(commands)
    if nc._flush_queue is not None and nc._flush_queue.empty():
        await nc._flush_pending()
