"""The rules' log reader: stored output of running containers in, :class:`LogSeen` on the job's subject out.

A durable of its own on ``LOGS`` (``rules-logs``, shared by the rules replicas, starting with
what is stored after it is first declared) hands over batches of lines; each is passed through
:func:`consumers.rules.live.scan` and what it found is published as one
:class:`~controller.contract.events.LogSeen` on the run's ``jobs.<ns>.<job>.logseen`` subject
through the one publish door (:class:`~controller.bus.publishing.Publisher`). So the rules
partition that owns the run folds it in order with the run's pod and job observations.

Not every batch is worth a message. A batch with a signature line always is; one without only
says the container's ranks are still printing, which the rules need now and then — to tell a
recovered line from one after which the rank stopped, and which rank stopped first in a hang —
so it is published at most every ``activity_s`` per container (the last batch of a container
held back is not lost: the next one says later times). That bound is per replica (an LRU of
:data:`MAX_CONTAINERS` containers); two replicas reading one container publish at most twice as
often. A batch published twice (redelivered) is one message: its id is where it ends in the log.

A batch from a follower that does not name the run's kind or the pod's uid (written before they
were in :class:`~controller.contract.logs.LogBatch`) cannot be attributed and is skipped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime

from consumers.rules.live import scan
from controller.bus.consuming import Durable
from controller.bus.publishing import Publisher
from controller.contract.clock import Clock
from controller.contract.events import JobRef, LogSeen
from controller.contract.logs import LogBatch
from controller.contract.subjects import RULES_LOGS_DURABLE

__all__ = ["CONSUMER", "LogReader", "durable", "told"]

CONSUMER = RULES_LOGS_DURABLE
MAX_CONTAINERS = 16_384
"""Containers whose last published activity a replica remembers (about 200 B each)."""


def parse_batch(payload: bytes) -> LogBatch:
    """One stored batch; raises ``pydantic.ValidationError`` for anything malformed."""
    return LogBatch.model_validate_json(payload)


def told(batch: LogBatch, now: datetime) -> LogSeen | None:
    """The :class:`LogSeen` of one batch read at ``now`` (None: a batch that names no run kind or
    pod uid, or holds no line)."""
    if batch.kind is None or batch.pod_uid is None or batch.role is None or not batch.lines:
        return None
    found = scan(batch.lines)
    end = batch.position
    return LogSeen(
        job=JobRef(uid=batch.run_uid, kind=batch.kind, namespace=batch.namespace, name=batch.job),
        uid=batch.pod_uid,
        name=batch.pod,
        role=batch.role,
        index=batch.index,
        container=batch.container,
        resource_version=f"{batch.container}.{end.ts}.{end.ties}",
        marks=found.marks,
        ranks=found.ranks,
        lines=len(batch.lines),
        observed_at=now,
    )


class LogReader:
    """Turns stored batches into :class:`LogSeen` events (see the module)."""

    def __init__(self, publisher: Publisher, clock: Clock, activity_s: float) -> None:
        self._publisher = publisher
        self._clock = clock
        self._activity_s = activity_s
        self._reported: OrderedDict[tuple[str, str], datetime] = OrderedDict()

    def seen(self, batch: LogBatch, now: datetime) -> LogSeen | None:
        """What ``batch`` tells the rules, or None when it tells nothing new enough."""
        event = told(batch, now)
        if event is None:
            return None
        key = (event.uid, event.container)
        last = self._reported.get(key)
        if not event.marks and last is not None and (now - last).total_seconds() < self._activity_s:
            return None
        self._reported[key] = now
        self._reported.move_to_end(key)
        while len(self._reported) > MAX_CONTAINERS:
            self._reported.popitem(last=False)
        return event

    async def apply(self, batches: Sequence[LogBatch]) -> None:
        """Publish what the batches tell; raises :class:`~controller.contract.errors.RetryableError`
        when the bus did not store it (the batches are delivered again)."""
        now = self._clock()
        events = [event for batch in batches if (event := self.seen(batch, now)) is not None]
        if events:
            await self._publisher.publish(events)


def durable(reader: LogReader) -> Durable[LogBatch]:
    """The reader's durable on ``LOGS``."""
    return Durable("logs", CONSUMER, parse_batch, reader.apply, new_only=True)
