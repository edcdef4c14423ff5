"""Pulling a durable consumer's messages: batches as soon as they are ready, no polling when idle.

A consumer that writes what it reads to PostgreSQL wants batches (one transaction for
hundreds of messages) and wants them at once (a failure waits for nobody). JetStream's
*one-shot* pull request gives both: ``{"batch": N, "expires": T, "no_wait": true}`` hands out
what the durable has ready, up to N, and ends with ``404 No Messages`` as soon as there is
no more; when nothing is ready it waits up to T for the first message, then ends the same
way (nats-server 2.7.1 and later). So an idle consumer holds one request for ``wait_s``
instead of asking again and again, and a trickle of events is handed over message by
message without waiting for a batch to fill.

Neither client library did this: nats-py's ``fetch`` waits for the whole batch once the
server has sent it to its second, lingering request (which ``408 Requests Pending`` from a
sibling replica does), and FastStream's batch subscriber keeps fetching until its timeout,
which made every idle subscriber poll every 10 ms (two idle history consumers took a third
of a core). So :class:`Puller` speaks the pull protocol over the nats-py connection itself:
one inbox subscription per durable, each request answered on an inbox subject of its own
(``<inbox>.<n>``), so the late status of a request given up on cannot end the next one
(messages arrive on their own subjects; whatever comes is kept for the next batch).

How a request ends (the server's status, in the message headers):

- ``batch`` messages delivered, ``404 No Messages`` after some, ``408 Request Timeout``,
  ``409 Batch Completed`` (its ``max_bytes`` reached): the normal ends;
- ``408 Requests Pending``, ``409 Exceeded MaxWaiting``: other replicas' requests are served
  first (a sign of load, not of trouble); asked again after ``busy_s``;
- ``409 Leadership Change``, ``404`` with nothing, ``503`` (no responders: a stream leader
  being elected, a server restarting): asked again after ``busy_s``, doubling while it
  lasts, up to ``wait_s``;
- ``409 Consumer Deleted`` and any other status: the durable is gone or the request is wrong,
  a :class:`PullError`, which stops the process (its supervisor restarts it, and the restart
  declares the durable again);
- silence: a request held by a server that went away gets no answer. Idle heartbeats
  (``heartbeat_s``) prove it alive; after two heartbeats and half a second without one the
  request is taken as lost and asked again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from dataclasses import replace

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import DEFAULT_PREFIX, ConsumerConfig
from nats.js.errors import NotFoundError

from controller.bus.answering import until_answered
from controller.bus.serverconfig import PULL_MAX_BYTES
from controller.contract.clock import pause

__all__ = ["PullError", "Puller"]

log = logging.getLogger(__name__)

_STATUS = "Status"
_DESCRIPTION = "Description"
_HEARTBEAT = "100"
_BUSY = frozenset({"Requests Pending", "Exceeded MaxWaiting"})
_LEADER_CHANGE = "Leadership Change"
_COMPLETED = "Batch Completed"  # the request's max_bytes were reached: it ended, as one that expired
_AGAIN = frozenset({"404", "503"})  # nothing for now (an old server), or no stream leader yet
_NS = 1_000_000_000


class PullError(Exception):
    """The server refused to hand out the durable's messages (it was deleted, or the request is wrong)."""


class Puller:
    """Batches of one durable pull consumer, handed over as soon as the server has them.

    :meth:`open` declares the durable (if it does not exist yet) and subscribes its inbox;
    :meth:`pull` returns the next batch (empty when ``wait_s`` passed with nothing, or when
    :meth:`interrupt` was called); :meth:`close` unsubscribes. One task pulls at a time."""

    def __init__(
        self,
        nc: NATS,
        stream: str,
        durable: str,
        *,
        batch: int,
        wait_s: float = 30.0,
        heartbeat_s: float = 5.0,
        busy_s: float = 0.01,
        api_prefix: str = DEFAULT_PREFIX,
    ) -> None:
        if batch < 1 or wait_s <= 0 or not 0 < heartbeat_s * 2 <= wait_s or busy_s <= 0:
            raise ValueError("batch ≥ 1, wait_s > 0, 0 < heartbeat_s ≤ wait_s / 2 and busy_s > 0 required")
        self._nc = nc
        self.stream = stream
        self.durable = durable
        self._batch = batch
        self._wait_s = wait_s
        self._heartbeat_s = heartbeat_s
        self._busy_s = busy_s
        self._next_subject = f"{api_prefix}.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = nc.new_inbox()
        self._sub: Subscription | None = None
        self._ready: list[Msg] = []
        self._requests = 0
        self._reply = ""
        self._delivered = 0
        self._ended: tuple[str, str] | None = None
        self._heard = 0.0
        self._done = asyncio.Event()
        self._interrupted = asyncio.Event()
        self._backoff = busy_s

    @classmethod
    async def open(
        cls,
        nc: NATS,
        stream: str,
        durable: str,
        config: ConsumerConfig,
        *,
        batch: int,
        wait_s: float = 30.0,
        heartbeat_s: float = 5.0,
    ) -> Puller:
        """Bind to durable ``durable`` of ``stream``, creating it with ``config`` if it does not exist
        (an existing one keeps its configuration and its position, as nats-py's ``pull_subscribe``
        binds)."""
        js, what = nc.jetstream(), f"durable {durable} of {stream}"
        try:
            await until_answered(functools.partial(js.consumer_info, stream, durable), what)
        except NotFoundError:
            await until_answered(
                functools.partial(js.add_consumer, stream, replace(config, durable_name=durable)), what
            )
        puller = cls(nc, stream, durable, batch=batch, wait_s=wait_s, heartbeat_s=heartbeat_s)
        await puller.start()
        return puller

    async def start(self) -> None:
        """Subscribe the inbox the requests are answered on (:meth:`open` does it)."""
        if self._sub is None:
            self._sub = await self._nc.subscribe(f"{self._inbox}.*", cb=self._receive)

    async def pull(self) -> list[Msg]:
        """The next batch: what the durable has ready (up to ``batch``), or the first messages to
        come within ``wait_s``; empty if none came or the puller was interrupted."""
        if self._sub is None:
            raise RuntimeError("start() the puller first")
        if not self._ready and not self._interrupted.is_set():
            await self._request()
        batch, self._ready = self._ready, []
        return batch

    def interrupt(self) -> None:
        """End the wait of a :meth:`pull` in progress (and of every later one): the process is stopping."""
        self._interrupted.set()
        self._done.set()

    async def close(self) -> None:
        """Stop receiving; unacknowledged messages go back to the durable after its ``ack_wait``."""
        self.interrupt()
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    async def _request(self) -> None:
        self._requests += 1
        self._reply = f"{self._inbox}.{self._requests}"
        self._delivered = 0
        self._ended = None
        self._done.clear()
        request = {
            "batch": self._batch,
            "expires": int(self._wait_s * _NS),
            "no_wait": True,
            "max_bytes": PULL_MAX_BYTES,
            "idle_heartbeat": int(self._heartbeat_s * _NS),
        }
        await self._nc.publish(self._next_subject, json.dumps(request).encode(), reply=self._reply)
        self._heard = time.monotonic()
        while not self._done.is_set():
            silence = self._heard + 2 * self._heartbeat_s + 0.5 - time.monotonic()
            try:
                await asyncio.wait_for(self._done.wait(), max(silence, 0.0))
            except TimeoutError:
                if time.monotonic() - self._heard >= 2 * self._heartbeat_s + 0.5:
                    log.info("pull request on %s/%s went unanswered; asking again", self.stream, self.durable)
                    self._reply = ""  # whatever it still delivers is kept for the next batch
                    return
        await self._after(self._ended)

    async def _after(self, ended: tuple[str, str] | None) -> None:
        """Pause before the next request when the server asked for it; fail when it refused."""
        if self._delivered or self._interrupted.is_set() or ended is None:  # messages, stopping, lost
            self._backoff = self._busy_s
            return
        status, description = ended
        if description in _BUSY:  # other replicas' requests take what is there: ours comes next
            await pause(self._interrupted, self._busy_s)
        elif status == "408" or description == _COMPLETED:  # the request ran its course: ask again
            self._backoff = self._busy_s
        elif status in _AGAIN or description == _LEADER_CHANGE:  # the server is not ready yet
            await pause(self._interrupted, self._backoff)
            self._backoff = min(self._backoff * 2, self._wait_s)
        else:
            raise PullError(f"{self.stream}/{self.durable}: {status} {description}".strip())

    async def _receive(self, msg: Msg) -> None:
        headers = msg.headers
        status = headers.get(_STATUS) if headers else None
        if status is None:  # a message: on its own subject, so counted for the request in progress
            self._ready.append(msg)
            self._heard = time.monotonic()
            self._delivered += 1
            if self._delivered >= self._batch:
                self._done.set()
            return
        if msg.subject != self._reply:
            return  # the end of a request given up on
        self._heard = time.monotonic()
        if status == _HEARTBEAT:
            return
        assert headers is not None
        self._ended = (status, headers.get(_DESCRIPTION, ""))
        self._done.set()
