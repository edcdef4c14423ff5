"""JetStream API requests asked again while the cluster cannot answer them yet.

A JetStream cluster answers its API (stream and consumer info, bucket creation, reads) only
through the leaders of its meta group and of each stream. While one is being elected — a
server killed, a rolling upgrade — a request gets no answer (a timeout), no responders, or
``503 JetStream system temporarily unavailable`` (error code 10008); and a stream created a
moment ago with several replicas may not be known yet to the server asked (``404 stream not
found``). None of those says the request is wrong: :func:`until_answered` asks again, with
jittered backoff, until it is answered or ``within_s`` has passed (then the last error is
raised). A publish has its own retries (:mod:`controller.bus.publishing`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js.errors import NotFoundError, ServiceUnavailableError

from controller.contract.backoff import Backoff

__all__ = ["ANSWER_WITHIN_S", "is_unanswered", "until_answered"]

log = logging.getLogger(__name__)

T = TypeVar("T")

ANSWER_WITHIN_S = 30.0
"""How long a request is asked again by default: a JetStream leader election takes seconds."""
_FIRST_S, _MAX_S = 0.05, 1.0


def is_unanswered(exc: BaseException, *, missing: bool = False) -> bool:
    """Whether ``exc`` says the cluster could not answer yet (``missing``: a ``404`` counts too,
    for what is known to exist — a stream or bucket just created, or one the caller declared)."""
    if isinstance(exc, NatsTimeoutError | NoRespondersError | ServiceUnavailableError | TimeoutError):
        return True
    return missing and isinstance(exc, NotFoundError)


async def until_answered(
    request: Callable[[], Awaitable[T]],
    what: str,
    *,
    missing: bool = False,
    within_s: float = ANSWER_WITHIN_S,
) -> T:
    """``await request()``, asked again while :func:`is_unanswered`, for up to ``within_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    backoff = Backoff(_FIRST_S, _MAX_S)
    while True:
        try:
            return await request()
        except Exception as exc:
            if not is_unanswered(exc, missing=missing) or loop.time() >= deadline:
                raise
            log.info("%s: JetStream did not answer yet (%r); asking again", what, exc)
        await asyncio.sleep(min(backoff.next_delay(), max(0.0, deadline - loop.time())))
