"""Publishing audit records without holding the API server up: a short wait, then spool or backlog."""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable, Sequence

from controller.contract.audit import AuditRecord
from controller.contract.backoff import Backoff
from controller.contract.clock import first_of, pause
from watchers.admission.metrics import AdmissionMetrics
from watchers.admission.spool import Spool

__all__ = ["Publish", "RecordPublisher"]

log = logging.getLogger(__name__)

Publish = Callable[[Sequence[AuditRecord]], Awaitable[int]]
"""Publishes records to JetStream; returns how many were stored."""

SPOOL_TIMEOUT_S = 1.5
"""Longest wait for the spool's fsync before the record is kept in memory instead: with
``publish_timeout_s`` (1 s) the answer still comes inside the API server's 3 s."""


class RecordPublisher:
    """Publishes records without holding the API server up: a short wait, then a background retry.

    A record JetStream did not store within ``timeout_s`` goes to the durable ``spool`` (when
    one is given) before the review is answered, else (or when the spool fails too) to a
    bounded in-memory backlog. :meth:`run` publishes both again, oldest first, and removes a
    spooled record only once JetStream acknowledged it.
    """

    BATCH = 100

    def __init__(
        self,
        publish: Publish,
        timeout_s: float,
        backlog: int,
        metrics: AdmissionMetrics,
        spool: Spool | None = None,
    ) -> None:
        self._publish = publish
        self._timeout_s = timeout_s
        self._limit = backlog
        self._metrics = metrics
        self._spool = spool
        self._backlog: collections.deque[AuditRecord] = collections.deque()
        self._waiting = asyncio.Event()
        self._waiting.set()  # a restart may find spooled records: look at once

    @property
    def pending(self) -> int:
        """Records waiting in the in-memory backlog."""
        return len(self._backlog)

    async def spooled(self) -> int:
        """Records waiting in the spool."""
        return 0 if self._spool is None else await self._spool.count()

    async def submit(self, record: AuditRecord) -> bool:
        """Publish ``record``, waiting at most the timeout; False if it was kept for a retry."""
        try:
            await asyncio.wait_for(self._publish([record]), self._timeout_s)
        except Exception as exc:  # NATS down, slow or refusing: keep it, answer the API server anyway
            log.warning("audit record %s not stored yet (%s); retrying in the background", record.id, exc)
            self._metrics.publish_failures.inc()
            await self._keep(record)
            return False
        return True

    async def _keep(self, record: AuditRecord) -> None:
        if self._spool is not None:
            try:
                await asyncio.wait_for(self._spool.put(record), SPOOL_TIMEOUT_S)
            except Exception as exc:
                log.error("audit record %s not spooled (%s); kept in memory", record.id, exc)
                self._metrics.spool_failures.inc()
            else:
                self._metrics.spooled.inc()
                self._waiting.set()
                return
        if len(self._backlog) >= self._limit:
            dropped = self._backlog.popleft()
            self._metrics.dropped.inc()
            log.error("audit backlog full (%d): dropped record %s", self._limit, dropped.id)
        self._backlog.append(record)
        self._metrics.backlog.set(len(self._backlog))
        self._waiting.set()

    async def run(self, stop: asyncio.Event, backoff_max_s: float = 10.0) -> None:
        """Retry the spool and the backlog, oldest first, until ``stop`` is set."""
        backoff = Backoff(0.1, backoff_max_s)
        while not stop.is_set():
            await first_of(self._waiting, stop)
            if stop.is_set():
                return
            self._waiting.clear()  # before looking: a record kept meanwhile sets it again
            try:
                more = await self._drain_spool() or await self._drain_backlog()
            except Exception as exc:
                self._waiting.set()
                log.info("audit records still not publishable: %s", exc)
                await pause(stop, backoff.next_delay())
                continue
            backoff.reset()
            if more:
                self._waiting.set()

    async def _drain_spool(self) -> bool:
        """Publish one batch of the spool; True if there was one."""
        if self._spool is None:
            return False
        self._metrics.spooled.set(await self._spool.count())  # also what a restart found
        batch = await self._spool.take(self.BATCH)
        if batch:
            await asyncio.wait_for(self._publish([item.record for item in batch]), self._timeout_s * 5)
            await self._spool.remove([item.key for item in batch])
            self._metrics.spooled.set(await self._spool.count())
        return bool(batch)

    async def _drain_backlog(self) -> bool:
        """Publish one batch of the in-memory backlog; True if there was one."""
        batch = list(self._backlog)[: self.BATCH]
        if not batch:
            return False
        await asyncio.wait_for(self._publish(batch), self._timeout_s * 5)
        for _ in batch:
            self._backlog.popleft()
        self._metrics.backlog.set(len(self._backlog))
        return True
