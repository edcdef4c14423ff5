"""The one way anything goes onto the bus: pipelined, each message deduplicated by its id.

Watchers publish job, pod and event observations, the rules consumer finding changes, the
admission webhook and the audit consumer audit records; all of them go through
:func:`publish`, which hands every message to the client without waiting (``publish_async``)
and then gathers the acknowledgements. Every message carries ``Nats-Msg-Id`` (the id each
message model derives from what it describes), so a message published twice within the
stream's duplicate window is stored once and the second ack says ``duplicate``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.api import PubAck

from controller.contract import audit, events, findings
from controller.contract.audit import AuditRecord
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent
from controller.contract.findings import Finding
from controller.contract.subjects import Topology

__all__ = ["MSG_ID", "Outgoing", "Publisher", "publish"]

MSG_ID = "Nats-Msg-Id"


@dataclass(frozen=True)
class Outgoing:
    """One message to publish: where, what, and the id JetStream deduplicates it by (if any)."""

    subject: str
    payload: bytes
    msg_id: str | None = None


ACK_TIMEOUT_S = 5.0


async def publish(
    js: JetStreamContext, messages: Sequence[Outgoing], ack_timeout_s: float = ACK_TIMEOUT_S
) -> list[PubAck | BaseException]:
    """Publish ``messages`` in order, pipelined; one result each, in order: its ack, or its error.

    A message the client would not even take stops the rest, which get the same error: a
    caller retrying the failed ones keeps the order of what it publishes. An ack that has not
    come ``ack_timeout_s`` after the last message was handed over is a :class:`TimeoutError`:
    the client keeps no deadline of its own for them, and an ack lost with the server that
    led the stream (killed in the middle of a publish) would otherwise be awaited for ever,
    holding one of the client's pending-publish slots.
    """
    futures: list[asyncio.Future[PubAck]] = []
    refused: BaseException | None = None
    for message in messages:
        try:
            headers = {MSG_ID: message.msg_id} if message.msg_id else None
            futures.append(await js.publish_async(message.subject, message.payload, headers=headers))
        except Exception as exc:  # not handed to the client: this one and the rest are not sent
            refused = exc
            break
    if futures:
        _, late = await asyncio.wait(futures, timeout=ack_timeout_s)
        for future in late:
            future.cancel()  # frees the client's slot; the message is retried under the same id
    results: list[PubAck | BaseException] = [_outcome(future, ack_timeout_s) for future in futures]
    if refused is not None:
        results += [refused] * (len(messages) - len(results))
    return results


def _outcome(future: asyncio.Future[PubAck], ack_timeout_s: float) -> PubAck | BaseException:
    if future.cancelled():
        return TimeoutError(f"no ack within {ack_timeout_s}s")
    return future.exception() or future.result()


def _new(results: Sequence[PubAck | BaseException]) -> int:
    """How many were stored anew; raises the first error if any message was not stored.

    The bus's own failures (no server, no stream leader answering in time during a fail-over,
    a lost connection) are :class:`RetryableError`: publishing the same messages again is safe,
    JetStream drops what it already stored by their ids."""
    for result in results:
        if isinstance(result, NatsError | OSError | TimeoutError):
            raise RetryableError(f"not published: {result!r}") from result
        if isinstance(result, BaseException):
            raise result
    return sum(1 for ack in results if isinstance(ack, PubAck) and not ack.duplicate)


@dataclass(frozen=True)
class Publisher:
    """Publishes the project's messages, each on its subject, with its deduplication id."""

    js: JetStreamContext
    topology: Topology

    async def publish(self, observed: Sequence[BusEvent]) -> int:
        """Publish watch observations; returns how many were new (not duplicates)."""
        return _new(await publish(self.js, [self.event(event) for event in observed]))

    async def publish_records(self, records: Sequence[AuditRecord]) -> int:
        """Publish namespaced audit records to ``audit.<ns>``; returns how many were new."""
        return _new(await publish(self.js, [self.record(record) for record in records]))

    async def publish_findings(self, changes: Sequence[Finding]) -> int:
        """Publish finding changes to ``findings.<ns>.<job>.<rule>``; returns how many were new."""
        return _new(await publish(self.js, [self.finding(finding) for finding in changes]))

    def event(self, event: BusEvent) -> Outgoing:
        """An observation as it goes out."""
        return Outgoing(
            self.topology.job_event(event),
            event.model_dump_json(exclude_defaults=False).encode(),
            events.message_id(event),
        )

    def finding(self, finding: Finding) -> Outgoing:
        """A change of a finding as it goes out."""
        return Outgoing(
            self.topology.finding(finding.job.namespace, finding.job.name, finding.rule),
            finding.model_dump_json().encode(),
            findings.message_id(finding),
        )

    def record(self, record: AuditRecord) -> Outgoing:
        """An audit record as it goes out; cluster-wide records (no namespace) are not published."""
        if record.namespace is None:
            raise ValueError(f"record {record.id} has no namespace; cluster-wide records are not published")
        return Outgoing(
            self.topology.audit(record.namespace), record.model_dump_json().encode(), audit.message_id(record)
        )
