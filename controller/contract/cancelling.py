"""Cancelling tasks that may lose a cancellation.

On Python 3.11 ``asyncio.wait_for`` returns the result, instead of raising, when the task
waiting in it is cancelled in the same turn of the loop as what it waits for completes
(python/cpython#86296, fixed in 3.12). nats-py waits for every request's answer that way, so
a log follow cancelled as its publish ack or its ``stored_end`` answer arrives goes on
following, and whoever waits for it to end (a partition handed over, a watcher stopping) waits
for ever. :func:`cancel_and_wait` cancels again what is still running; :func:`stop_within` first
gives tasks told to stop a while to end on their own. Every stop of a set of tasks goes through
one of the two."""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any

__all__ = ["AGAIN_S", "cancel_and_wait", "stop_within"]

AGAIN_S = 0.5
"""How long a cancelled task is given to end before it is cancelled again."""


async def cancel_and_wait(tasks: Collection[asyncio.Future[Any]], again_s: float = AGAIN_S) -> None:
    """Cancel ``tasks`` and return once every one has ended, cancelling again every ``again_s``
    those that lost their cancellation. A cancellation of the caller is not swallowed."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=again_s)


async def stop_within(tasks: Collection[asyncio.Future[Any]], timeout_s: float) -> None:
    """Give ``tasks``, already told to stop, ``timeout_s`` to end on their own; then cancel those
    still running (:func:`cancel_and_wait`). Their exceptions are left to the caller to collect."""
    pending = {task for task in tasks if not task.done()}
    if pending:
        _, pending = await asyncio.wait(pending, timeout=timeout_s)
    await cancel_and_wait(pending)
