"""The one way anything goes onto the bus: pipelined, deduplicated by id, retried while it may pass.

Watchers publish job, pod and event observations (progress probes included), the rules
consumer finding changes, the admission webhook and the audit consumer audit records; all of
them go through :func:`publish_acked` (:class:`Publisher` for the project's messages). It hands
every message to the client without waiting for its ack, gathers the acknowledgements of the
whole batch on one inbox subscription of the connection (:func:`publish`), and publishes again,
with backoff, whatever the bus could not store yet — no stream leader answering during an
election, an ack lost with a killed server, a connection being re-established — until
``NatsSettings.publish_retry_s`` has passed. Every message carries ``Nats-Msg-Id`` (the id each
message model derives from what it describes), so a message published twice within the
stream's duplicate window is stored once and the second ack says ``duplicate``: retrying is
safe. What still failed after the bound is a :class:`RetryableError` for the caller to decide
on (keep trying, nak the batch, or count it and go on).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeGuard
from weakref import WeakKeyDictionary

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import Error as NatsError
from nats.errors import MaxPayloadError
from nats.js import JetStreamContext
from nats.js.api import PubAck
from nats.js.errors import APIError, NoStreamResponseError
from pydantic_core import from_json

from controller.bus.handing import hand_over, sendable, takes_at_once
from controller.contract import audit, events, findings
from controller.contract.audit import AuditRecord
from controller.contract.backoff import Backoff
from controller.contract.cancelling import cancel_and_wait
from controller.contract.errors import RetryableError
from controller.contract.events import BusEvent
from controller.contract.findings import Finding
from controller.contract.settings import NatsSettings
from controller.contract.subjects import Topology

__all__ = [
    "MSG_ID",
    "PUBLISH_RETRY_S",
    "Bursts",
    "Outgoing",
    "Publisher",
    "publish",
    "publish_acked",
    "publish_stored",
    "stored_anew",
]

log = logging.getLogger(__name__)

MSG_ID = "Nats-Msg-Id"
_AFTER_SUBJECT_SEQ = "Nats-Expected-Last-Subject-Sequence"
_STATUS = "Status"
_NO_RESPONDERS = "503"
_TEMPORARILY_UNAVAILABLE = 10008  # "JetStream system temporarily unavailable"; stream limits are 503s too


@dataclass(frozen=True)
class Outgoing:
    """One message to publish: where, what, and the id JetStream deduplicates it by (if any)."""

    subject: str
    payload: bytes
    msg_id: str | None = None
    after_subject_seq: int | None = None
    """Stored only if the subject's last message has this sequence (0: the subject is empty)."""


ACK_TIMEOUT_S = 5.0
PUBLISH_RETRY_S: float = NatsSettings.model_fields["publish_retry_s"].default
"""The bound of :func:`publish_acked` where no settings are at hand (tests, tools)."""
_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 1.0  # a leader elected or a connection back is seen within a second
_ACKS: WeakKeyDictionary[NATS, _Acks] = WeakKeyDictionary()


async def publish(
    js: JetStreamContext,
    messages: Sequence[Outgoing],
    ack_timeout_s: float = ACK_TIMEOUT_S,
    answered: Callable[[int, PubAck | BaseException], None] | None = None,
) -> list[PubAck | BaseException]:
    """Publish ``messages`` in order, pipelined; one result each, in order: its ack, or its error.

    A message the client would not even take stops the rest, which get the same error: a
    caller retrying the failed ones keeps the order of what it publishes. An ack that has not
    come ``ack_timeout_s`` after the last message was handed over is a :class:`TimeoutError`
    (an ack lost with the server that led the stream, killed in the middle of a publish, never
    comes), and the message is published again under the same id by whoever retries.
    ``answered`` is told each message's outcome (by its index) as it comes.
    """
    if not messages:
        return []
    nc: NATS = js._nc  # nats-py keeps a context's connection there and offers no accessor
    acks = _ACKS.get(nc)
    if acks is None:
        acks = _ACKS.setdefault(nc, _Acks(nc))
    return await acks.publish(messages, ack_timeout_s, answered)


class _Acks:
    """The acknowledgements of one connection's publishes, on one inbox subscription.

    nats-py's ``publish_async`` does the same per message, with a future, a random reply token
    (a system call), a semaphore and a parsed ack object each: about half of a watcher's CPU
    per event went there. Here a batch of messages shares one record of outcomes, each message
    replies to ``<inbox>.<batch>.<index>``, and the batch is done when every index has
    answered (or its time is up)."""

    def __init__(self, nc: NATS) -> None:
        self._nc = nc
        self._inbox = f"{self._nc.new_inbox()}."
        self._batches: dict[int, _Batch] = {}
        self._count = 0
        self._subscribing = asyncio.Lock()
        self._subscribed = False

    async def publish(
        self,
        messages: Sequence[Outgoing],
        ack_timeout_s: float,
        answered: Callable[[int, PubAck | BaseException], None] | None = None,
    ) -> list[PubAck | BaseException]:
        await self._subscribe()
        self._count += 1
        number, batch = self._count, _Batch(len(messages), answered)
        self._batches[number] = batch
        reply = f"{self._inbox}{number}."
        try:
            commands = _commands(self._nc, messages, reply)
            if commands is not None:
                try:
                    payload = sum(len(message.payload) for message in messages)
                    await hand_over(self._nc, commands, len(messages), payload)
                except Exception as exc:  # not handed to the client: none is sent (a retry repeats their ids)
                    batch.refuse(0, exc)
            for index, message in enumerate(messages if commands is None else ()):
                headers = _headers(message)
                try:
                    await self._nc.publish(message.subject, message.payload, f"{reply}{index}", headers)
                except Exception as exc:  # not handed to the client: this one and the rest are not sent
                    batch.refuse(index, exc)
                    break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(ack_timeout_s):  # not wait_for: on 3.11 it can lose a cancellation
                    await batch.done.wait()
        finally:
            del self._batches[number]
        return batch.outcomes(ack_timeout_s)

    async def _subscribe(self) -> None:
        async with self._subscribing:
            if not self._subscribed:
                await self._nc.subscribe(f"{self._inbox}>", cb=self._receive)
                self._subscribed = True

    async def _receive(self, msg: Msg) -> None:
        number, _, index = msg.subject[len(self._inbox) :].partition(".")
        batch = self._batches.get(int(number)) if number.isdigit() and index.isdigit() else None
        if batch is not None:  # else answered after its time was up: retried under the same id
            batch.settle(int(index), _outcome(msg))


_HEADERS_START = b"NATS/1.0\r\n"


def _commands(nc: NATS, messages: Sequence[Outgoing], reply: str) -> bytes | None:
    """``messages`` as the protocol commands nats-py's ``publish`` writes for each (``HPUB``
    with its headers, ``PUB`` without), message ``i`` answering to ``<reply><i>``, in one run:
    the client's checks, command and flush request once per batch instead of once per message
    (a third of the watcher's publishing CPU). ``None`` where its publish would not simply take
    them: not connected (it buffers, or refuses), draining, a payload over its limit, or a
    subject or id with a space or line break (which it refuses or rewrites); those are
    published one by one as before."""
    if not takes_at_once(nc) or any(len(message.payload) > nc._max_payload for message in messages):
        return None
    if not sendable(message.subject for message in messages) or not sendable(
        message.msg_id for message in messages if message.msg_id
    ):
        return None
    parts: list[bytes] = []
    for index, message in enumerate(messages):
        headers = _headers(message)
        if headers is None:
            parts.append(f"PUB {message.subject} {reply}{index} {len(message.payload)}\r\n".encode())
            parts.append(message.payload)
            parts.append(b"\r\n")
            continue
        head = (
            _HEADERS_START
            + "".join(f"{key}: {value}\r\n" for key, value in headers.items()).encode()
            + b"\r\n"
        )
        total = len(head) + len(message.payload)
        parts.append(f"HPUB {message.subject} {reply}{index} {len(head)} {total}\r\n".encode())
        parts.append(head)
        parts.append(message.payload)
        parts.append(b"\r\n")
    return b"".join(parts)


def _headers(message: Outgoing) -> dict[str, str] | None:
    headers = {MSG_ID: message.msg_id} if message.msg_id else {}
    if message.after_subject_seq is not None:
        headers[_AFTER_SUBJECT_SEQ] = str(message.after_subject_seq)
    return headers or None


class _Batch:
    """The outcome of each message of one :func:`publish`, as the acks come."""

    def __init__(
        self, size: int, answered: Callable[[int, PubAck | BaseException], None] | None = None
    ) -> None:
        self._results: list[PubAck | BaseException | None] = [None] * size
        self._answered = answered
        self._missing = size
        self.done = asyncio.Event()

    def settle(self, index: int, result: PubAck | BaseException) -> None:
        if 0 <= index < len(self._results) and self._results[index] is None:
            self._results[index] = result
            if self._answered is not None:
                self._answered(index, result)
            self._missing -= 1
            if not self._missing:
                self.done.set()

    def refuse(self, index: int, error: BaseException) -> None:
        """Message ``index`` and the rest were not sent."""
        for later in range(index, len(self._results)):
            self.settle(later, error)

    def outcomes(self, ack_timeout_s: float) -> list[PubAck | BaseException]:
        late = TimeoutError(f"no ack within {ack_timeout_s}s")
        return [late if result is None else result for result in self._results]


def _outcome(msg: Msg) -> PubAck | BaseException:
    """What JetStream answered to one message."""
    if msg.headers and msg.headers.get(_STATUS) == _NO_RESPONDERS:  # no stream takes this subject
        return NoStreamResponseError()
    try:
        answer = from_json(msg.data)
        if "error" in answer:
            APIError.from_error(answer["error"])  # raises the error's own class
        return PubAck(
            stream=answer["stream"],
            seq=answer["seq"],
            domain=answer.get("domain"),
            duplicate=answer.get("duplicate"),
        )
    except (APIError, ValueError, KeyError, TypeError) as exc:
        return exc


async def publish_acked(
    js: JetStreamContext,
    messages: Sequence[Outgoing],
    retry_s: float = PUBLISH_RETRY_S,
    ack_timeout_s: float = ACK_TIMEOUT_S,
) -> list[PubAck | BaseException]:
    """:func:`publish`, then publish again what the bus could not store yet, until ``retry_s``.

    A retry publishes again from the first message not stored, in order (what was stored
    since collapses on its id), after a jittered backoff of 50 ms doubling up to 1 s; none
    starts after ``retry_s`` (one more ``ack_timeout_s`` may pass waiting for its acks). Each
    message's result is its first ack, or its last error: an error that will not pass by
    trying again (a refused message) is returned at once."""
    deadline = asyncio.get_running_loop().time() + retry_s
    return await _again(js, messages, await publish(js, messages, ack_timeout_s), deadline, ack_timeout_s)


async def _again(
    js: JetStreamContext,
    messages: Sequence[Outgoing],
    results: list[PubAck | BaseException],
    deadline: float,
    ack_timeout_s: float,
) -> list[PubAck | BaseException]:
    """The retries of :func:`publish_acked` after its first ``results``, none starting after the
    loop's time ``deadline``."""
    loop = asyncio.get_running_loop()
    backoff = Backoff(_RETRY_FIRST_S, _RETRY_MAX_S)
    while (first := next((i for i, r in enumerate(results) if _passes(r)), None)) is not None:
        delay = backoff.next_delay()
        if loop.time() + delay > deadline:
            break
        log.info(
            "%d of %d messages not stored yet, publishing again in %.2fs: %r",
            sum(1 for r in results if _passes(r)),
            len(results),
            delay,
            results[first],
        )
        await asyncio.sleep(delay)
        again = await publish(js, messages[first:], ack_timeout_s)
        for index, result in enumerate(again, start=first):
            if not isinstance(results[index], PubAck):  # the first ack says whether it was new
                results[index] = result
    return results


async def publish_stored(
    js: JetStreamContext, messages: Sequence[Outgoing], retry_s: float = PUBLISH_RETRY_S
) -> int:
    """:func:`publish_acked`; returns how many were stored anew, raises :class:`RetryableError`
    if the bus still had not stored one of them after ``retry_s`` (and a refused message's own
    error)."""
    return stored_anew(await publish_acked(js, messages, retry_s))


class Bursts:
    """Single messages handed over by many tasks in one turn of the event loop, published together
    as one burst (:func:`publish`: one record of outcomes, one wait for the acks), each
    answered as its own ack comes and retried on its own as :func:`publish_acked` retries it:
    the per-message cost of publishing alone (its wait, its timeout, its wake-ups) paid once
    per burst. What many log follows publish, a few lines each."""

    def __init__(self, js: JetStreamContext, retry_s: float, ack_timeout_s: float = ACK_TIMEOUT_S) -> None:
        self._js = js
        self._retry_s = retry_s
        self._ack_timeout_s = ack_timeout_s
        self._waiting: list[tuple[Outgoing, asyncio.Future[PubAck | BaseException]]] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def publish(self, message: Outgoing) -> PubAck | BaseException:
        """:func:`publish_acked` of ``message`` alone, with those handed over in the same turn."""
        loop = asyncio.get_running_loop()
        if not self._waiting:
            loop.call_soon(self._send)
        outcome: asyncio.Future[PubAck | BaseException] = loop.create_future()
        self._waiting.append((message, outcome))
        return await outcome

    def _send(self) -> None:
        burst, self._waiting = self._waiting, []
        task = asyncio.create_task(self._publish(burst), name="publish-burst")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _publish(self, burst: list[tuple[Outgoing, asyncio.Future[PubAck | BaseException]]]) -> None:
        deadline = asyncio.get_running_loop().time() + self._retry_s

        def answered(index: int, result: PubAck | BaseException) -> None:
            """A final outcome goes to its publisher at once, not after the burst's last ack."""
            outcome = burst[index][1]
            if not _passes(result) and not outcome.done():
                outcome.set_result(result)

        try:
            messages = [message for message, _ in burst]
            results = await publish(self._js, messages, self._ack_timeout_s, answered)
            again = [i for i, result in enumerate(results) if _passes(result)]
            retried = await asyncio.gather(
                *(_again(self._js, [messages[i]], [results[i]], deadline, self._ack_timeout_s) for i in again)
            )
            for i, (result,) in zip(again, retried, strict=True):
                results[i] = result
        except Exception as exc:  # what publish_acked would have raised to each of them
            for _, outcome in burst:
                if not outcome.done():
                    outcome.set_exception(exc)
            return
        except asyncio.CancelledError:  # closed: so are those waiting
            for _, outcome in burst:
                outcome.cancel()
            raise
        for (_, outcome), result in zip(burst, results, strict=True):
            if not outcome.done():  # else its publisher was cancelled meanwhile
                outcome.set_result(result)

    async def close(self) -> None:
        """Stop the bursts in flight (those waiting for them are cancelled)."""
        await cancel_and_wait(list(self._sending))


def _passes(result: PubAck | BaseException) -> bool:
    """Worth publishing again at once: the bus's own failures (:func:`_retryable`), not a message
    the client or the stream refused (too big, a stream limit), which the next try would refuse
    again."""
    if isinstance(result, APIError):
        return result.err_code == _TEMPORARILY_UNAVAILABLE
    return _retryable(result) and not isinstance(result, MaxPayloadError)


def _retryable(result: PubAck | BaseException) -> TypeGuard[BaseException]:
    """The bus's own failures, which pass: no server, no stream leader answering in time during
    a fail-over, a lost connection."""
    return isinstance(result, NatsError | OSError | TimeoutError)


def stored_anew(results: Sequence[PubAck | BaseException]) -> int:
    """How many were stored anew; raises the first error if any message was not stored.

    The bus's own failures are :class:`RetryableError`: publishing the same messages again is
    safe, JetStream drops what it already stored by their ids."""
    for result in results:
        if _retryable(result):
            raise RetryableError(f"not published: {result!r}") from result
        if isinstance(result, BaseException):
            raise result
    return sum(1 for ack in results if isinstance(ack, PubAck) and not ack.duplicate)


@dataclass(frozen=True)
class Publisher:
    """Publishes the project's messages, each on its subject, with its deduplication id, retrying
    for up to ``retry_s`` (:func:`publish_acked`); what is still not stored then raises
    :class:`RetryableError`."""

    js: JetStreamContext
    topology: Topology
    retry_s: float = PUBLISH_RETRY_S

    async def publish(self, observed: Sequence[BusEvent]) -> int:
        """Publish watch observations; returns how many were new (not duplicates)."""
        return await publish_stored(self.js, [self.event(event) for event in observed], self.retry_s)

    async def publish_records(self, records: Sequence[AuditRecord]) -> int:
        """Publish namespaced audit records to ``audit.<ns>``; returns how many were new."""
        return await publish_stored(self.js, [self.record(record) for record in records], self.retry_s)

    async def publish_findings(self, changes: Sequence[Finding]) -> int:
        """Publish finding changes to ``findings.<ns>.<job>.<rule>``; returns how many were new."""
        return await publish_stored(self.js, [self.finding(finding) for finding in changes], self.retry_s)

    async def acked(self, messages: Sequence[Outgoing]) -> list[PubAck | BaseException]:
        """Each message's ack or its error after the retries (:func:`publish_acked`)."""
        return await publish_acked(self.js, messages, self.retry_s)

    def event(self, event: BusEvent) -> Outgoing:
        """An observation as it goes out."""
        return Outgoing(
            self.topology.job_event(event),
            # the bytes of event.model_dump_json(), without its wrapper's keywords and a str between
            type(event).__pydantic_serializer__.to_json(event),
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
