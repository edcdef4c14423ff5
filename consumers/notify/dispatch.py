"""The dispatcher: sends due deliveries from the outbox, isolated per endpoint, and settles them.

One loop claims due rows (:func:`controller.store.outbox.claim`: oldest first, one job's events
in order, at most ``endpoint_concurrency`` per subscription, none for a subscription that
already has that many in flight) and starts one task per row. Each task waits for its
endpoint's semaphore, makes one attempt with a whole-request timeout, and queues the
outcome; a writer settles queued outcomes in batches (:func:`controller.store.outbox.record`,
one statement per batch) and wakes the loop when that can give it more to claim: the batch
made due the next event of a job it settled, or the last claim was held back (it took all
the room it had, or left an endpoint of the batch at its concurrency). Any other batch wakes
nothing: a claim that would find nothing costs PostgreSQL a planning of the claim query and
the dispatcher a transaction.
The loop also wakes when PostgreSQL announces new due rows (:mod:`controller.store.wakeups`:
the notify consumer, a redelivery or a re-enabled subscription, in whatever process), and
polls every ``poll_interval_s`` for retries coming due.

Isolation follows from three bounds: a slow or dead endpoint holds at most
``endpoint_concurrency`` of the ``max_in_flight`` slots, each for at most
``request_timeout_s``, and its later rows are not even claimed meanwhile — other
endpoints' rows are claimed and sent past it.

Nothing lives only in memory: a row is leased while in flight, so if the process dies the
row is sent again after ``lease_s`` (same ``webhook-id``: at least once); retries are rows
with a later ``next_attempt_at``. Email rows go through :meth:`Dispatcher._email`, which
throttles per job and groups what is pending into one digest. An email that cannot even be
composed (a payload that no longer parses, a header the mail library refuses) can never be
sent: it is settled dead at once with the reason, the rest of the digest goes out without it,
and the job's later emails are not held behind it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from email.message import EmailMessage

from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.notify.alertmanager import AlertmanagerPusher
from consumers.notify.mailing import Mailer, MailError, compose, smtp_mailer
from consumers.notify.metrics import AlertmanagerMetrics, NotifyMetrics
from consumers.notify.sending import Attempt, EndpointTransports, RetrySchedule, Verdict, WebhookSender
from consumers.wiring import Role, Wiring
from controller.contract import cloudevents
from controller.contract.cancelling import stop_within
from controller.contract.clock import Clock, pause, utcnow
from controller.contract.egress import EgressPolicy, Resolver, system_resolver
from controller.contract.notifications import parse_payload
from controller.contract.settings import NotifySettings
from controller.metrics import PipelineMetrics
from controller.store import outbox, wakeups
from controller.store.engine import UNAVAILABLE
from controller.store.outbox import AttemptResult, Claim, Outcome
from controller.store.subscriptions import SecretBox, SubscriptionRecord, secret_box, use_secret_keys

log = logging.getLogger(__name__)

_FLUSH_MAX = 1000
PURGE_EVERY_S = 600.0
"""Seconds between purges of settled deliveries past ``notify.retention_s``."""
_WRITE_RETRY_S = 0.5
_WRITE_TRIES = 5


def current_secrets(sub: SubscriptionRecord, now: datetime, box: SecretBox | None = None) -> list[str]:
    """The secrets a webhook is signed with: the current one, and the previous during the overlap
    (decrypted when stored encrypted)."""
    box = box or secret_box()
    stored = [sub.secret] if sub.secret else []
    if sub.previous_secret and sub.previous_secret_until and sub.previous_secret_until > now:
        stored.append(sub.previous_secret)
    return [secret for value in stored if (secret := box.open(value, sub.id))]


class Dispatcher:
    """Sends what the outbox holds; run one or more per installation (claims never overlap)."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: NotifySettings,
        metrics: PipelineMetrics,
        *,
        mailer: Mailer | None = None,
        resolver: Resolver = system_resolver,
        clock: Clock = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self._engine = engine
        self._settings = settings
        self._secrets = use_secret_keys(settings.secret_keys)  # warns at start when there are none
        self._metrics = NotifyMetrics.on(metrics.registry)
        self._mailer = mailer
        self._policy = EgressPolicy(settings.allow_cidrs, resolver, settings.allow_ports)
        self._backoff = RetrySchedule(
            settings.retry_schedule_s,
            settings.retry_jitter,
            settings.max_retry_after_s,
            rng or random.Random(),
        )
        self._clock = clock
        self._wakeup = asyncio.Event()
        self.listening = asyncio.Event()
        """Set while a connection listens for the consumer's wake-ups (:data:`outbox.WAKE_CHANNEL`)."""
        self._outcomes: asyncio.Queue[Outcome | None] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: dict[str, int] = {}
        self._gates: dict[str, asyncio.Semaphore] = {}
        self._full = False
        """Whether the last claim took all the room it had (or had none): due rows may be left."""
        self._capped: set[str] = set()
        """Subscriptions at their concurrency after the last claim: their due rows were left."""

    def wake(self) -> None:
        """Look for due deliveries now (something enqueued or redelivered some)."""
        self._wakeup.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Dispatch until ``stop`` is set, then finish what is in flight and settle it."""
        s = self._settings
        transports = EndpointTransports(s.endpoint_concurrency)
        sender = WebhookSender(transports, self._policy, s.request_timeout_s)
        helpers = [
            asyncio.create_task(self._write_outcomes()),
            asyncio.create_task(self._housekeeping(stop, transports)),
            asyncio.create_task(self._wake_on(stop)),
        ]
        listener = asyncio.create_task(
            wakeups.listen(self._engine, outbox.WAKE_CHANNEL, self.wake, stop, self.listening)
        )
        try:
            await self._claim_loop(stop, sender)
        finally:
            if self._tasks:
                # one still sending is cancelled: its lease expires and another dispatcher sends it again
                await stop_within(self._tasks, s.request_timeout_s + 1)
            await self._outcomes.put(None)
            await helpers[0]
            for helper in helpers[1:]:
                helper.cancel()
            await asyncio.gather(*helpers[1:], listener, return_exceptions=True)
            await transports.aclose()

    # ----------------------------------------------------------------- claiming

    async def _wake_on(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self._wakeup.set()

    async def _claim_loop(self, stop: asyncio.Event, sender: WebhookSender) -> None:
        s = self._settings
        while not stop.is_set():
            self._wakeup.clear()
            room = min(s.max_in_flight - len(self._tasks), s.claim_batch)
            claimed = 0
            if room > 0:
                try:
                    claimed = await self._claim(room, sender)
                except UNAVAILABLE as exc:
                    log.warning("notify dispatcher: cannot claim deliveries: %s", exc)
            self._full = room <= 0 or claimed >= room
            if claimed < room or room <= 0:
                await pause(self._wakeup, s.poll_interval_s)

    async def _claim(self, room: int, sender: WebhookSender) -> int:
        s = self._settings
        saturated = {sub for sub, n in self._in_flight.items() if n >= s.endpoint_concurrency}
        now = self._clock()
        self._metrics.claims.inc()
        async with self._engine.begin() as conn:
            claims = await outbox.claim(
                conn, now, now + timedelta(seconds=s.lease_s), room, s.endpoint_concurrency, saturated
            )
            subs = await outbox.endpoints(conn, {c.subscription_id for c in claims}) if claims else {}
        for claim in claims:
            sub = subs.get(claim.subscription_id)
            if sub is None:  # deleted between claim and read: its rows are gone too
                continue
            self._in_flight[sub.id] = self._in_flight.get(sub.id, 0) + 1
            task = asyncio.create_task(self._deliver(claim, sub, sender))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._capped = {sub for sub, n in self._in_flight.items() if n >= s.endpoint_concurrency}
        self._metrics.in_flight.set(len(self._tasks))
        return len(claims)

    async def _deliver(self, claim: Claim, sub: SubscriptionRecord, sender: WebhookSender) -> None:
        gate = self._gates.setdefault(sub.id, asyncio.Semaphore(self._settings.endpoint_concurrency))
        try:
            async with gate:
                if claim.channel == "email":
                    outcomes = await self._email(claim, sub)
                else:
                    attempt = await self._webhook(claim, sub, sender)
                    outcomes = [self._settle(claim, sub, attempt)]
            for outcome in outcomes:
                self._outcomes.put_nowait(outcome)
        except Exception:  # the lease brings it back; one bad row must not stop the others
            log.exception("notify dispatcher: delivery %s to %s failed unexpectedly", claim.id, sub.id)
        finally:
            left = self._in_flight[sub.id] = self._in_flight[sub.id] - 1
            if left <= 0:
                del self._in_flight[sub.id]
                self._gates.pop(sub.id, None)

    async def _webhook(self, claim: Claim, sub: SubscriptionRecord, sender: WebhookSender) -> Attempt:
        """One attempt to POST ``claim`` to ``sub``'s endpoint in the subscription's format."""
        secrets = current_secrets(sub, self._clock(), self._secrets)
        if sub.format == "standard":
            return await sender.send(sub.id, sub.url or "", claim.id, claim.body.encode(), secrets)
        try:
            body, headers = cloudevents.encode(claim.body, claim.id, sub.format, self._settings.cluster)
        except ValueError as exc:  # a payload that no longer parses: no attempt can succeed
            return Attempt("failed", None, 0.0, f"cannot encode the event as {sub.format}: {exc}"[:1000])
        return await sender.send(sub.id, sub.url or "", claim.id, body, secrets, headers)

    def _settle(self, claim: Claim, sub: SubscriptionRecord, attempt: Attempt) -> Outcome:
        """The outcome of ``attempt``: delivered, retried after a backoff, or dead."""
        number, now = claim.attempts + 1, self._clock()
        self._metrics.attempt_seconds.labels(claim.channel).observe(attempt.latency_s)
        delay = self._backoff.delay(number, attempt.retry_after_s) if attempt.verdict == "retry" else None
        result: AttemptResult = "failed"
        if attempt.verdict == "delivered":
            result = "delivered"
        elif delay is not None:
            result = "retry"
        else:
            log.warning(
                "notify: %s delivery %s to subscription %s is dead after %d attempt(s): %s",
                claim.channel,
                claim.id,
                sub.id,
                number,
                f"HTTP {attempt.status_code}" if attempt.status_code else attempt.error,
            )
        outcome = Outcome(  # built once: this runs for every delivery
            seq=claim.seq,
            subscription_id=sub.id,
            attempt=number,
            at=now,
            result=result,
            order_key=claim.order_key,
            next_attempt_at=now + timedelta(seconds=delay) if delay is not None else None,
            status_code=attempt.status_code,
            latency_ms=round(attempt.latency_s * 1000, 3),
            error=attempt.error,
            endpoint_failed=result != "delivered",
            disable="the endpoint answered 410 Gone" if attempt.verdict == "gone" else None,
        )
        self._metrics.deliveries.labels(claim.channel, outcome.result).inc()
        return outcome

    # ----------------------------------------------------------------- email

    async def _email(self, claim: Claim, sub: SubscriptionRecord) -> list[Outcome]:
        """Send the job's pending emails as one message, unless one went out within the digest window."""
        now = self._clock()
        window = timedelta(seconds=self._settings.digest_window_s)
        async with self._engine.begin() as conn:
            last = await outbox.last_delivered(conn, sub.id, claim.order_key)
            if last is not None and now < last + window:
                await outbox.defer(conn, [claim.seq], last + window)
                return []
            group = [claim] + [
                c for c in await outbox.pending_group(conn, sub.id, claim.order_key) if c.seq > claim.seq
            ]
        started = time.perf_counter()
        broken: list[Outcome] = []
        if self._mailer is None:
            attempt = Attempt("failed", None, 0.0, "email is not configured (notify.smtp.host is unset)")
        else:
            message, group, broken = self._compose(group, sub)
            if message is None or group[0] is not claim:  # the head itself cannot be composed
                return broken
            try:
                await self._mailer.send(message)
                attempt = Attempt("delivered", None, time.perf_counter() - started)
            except MailError as exc:
                verdict: Verdict = "failed" if exc.permanent else "retry"
                attempt = Attempt(verdict, None, time.perf_counter() - started, str(exc))
        head = self._settle(claim, sub, attempt)
        if head.result != "delivered":
            return [head, *broken]
        return [head, *broken] + [
            Outcome(
                seq=c.seq,
                subscription_id=sub.id,
                attempt=c.attempts + 1,
                at=head.at,
                result="delivered",
                latency_ms=head.latency_ms,
                error=f"sent in the digest of {claim.id}",
            )
            for c in group[1:]
        ]

    def _compose(
        self, group: list[Claim], sub: SubscriptionRecord
    ) -> tuple[EmailMessage | None, list[Claim], list[Outcome]]:
        """The email for ``group``, the deliveries it carries, and dead outcomes for those that can
        never be composed (each is tried alone once the whole group fails)."""

        def build(claims: list[Claim]) -> EmailMessage:
            return compose(
                [parse_payload(c.body) for c in claims],
                sub.recipients,
                self._settings.smtp.sender,
                [c.id for c in claims],
            )

        try:
            return build(group), group, []
        except Exception as exc:  # whatever it is, retrying the same rows cannot help
            if len(group) == 1:
                return None, [], [self._uncomposable(group[0], sub, exc)]
        good: list[Claim] = []
        broken: list[Outcome] = []
        for c in group:
            try:
                build([c])
                good.append(c)
            except Exception as exc:
                broken.append(self._uncomposable(c, sub, exc))
        if not good:
            return None, [], broken
        try:
            return build(good), good, broken
        except Exception:  # each composes alone, not together: send the first alone
            return build(good[:1]), good[:1], broken

    def _uncomposable(self, claim: Claim, sub: SubscriptionRecord, exc: Exception) -> Outcome:
        """A dead outcome for a delivery whose email cannot be composed (no attempt can succeed)."""
        error = f"cannot compose the email: {type(exc).__name__}: {exc}"[:1000]
        log.warning("notify: email delivery %s to subscription %s is dead: %s", claim.id, sub.id, error)
        self._metrics.deliveries.labels(claim.channel, "failed").inc()
        return Outcome(
            seq=claim.seq,
            subscription_id=sub.id,
            attempt=claim.attempts + 1,
            at=self._clock(),
            result="failed",
            order_key=claim.order_key,
            error=error,
            endpoint_failed=None,  # says nothing about the mail server
        )

    # ----------------------------------------------------------------- settling

    async def _write_outcomes(self) -> None:
        """Settle queued outcomes in batches until the ``None`` sentinel arrives."""
        done = False
        while not done:
            first = await self._outcomes.get()
            batch: list[Outcome] = [] if first is None else [first]
            done = first is None
            while not self._outcomes.empty() and len(batch) < _FLUSH_MAX:
                item = self._outcomes.get_nowait()
                if item is None:
                    done = True
                    break
                batch.append(item)
            if batch and (await self._flush(batch) or self._held_back(batch)):
                self._wakeup.set()  # a settled row freed the one behind it, or freed room
            self._metrics.in_flight.set(len(self._tasks))

    def _held_back(self, batch: Sequence[Outcome]) -> bool:
        """Whether the last claim left due rows that settling ``batch`` makes room for."""
        return self._full or any(o.subscription_id in self._capped for o in batch)

    async def _flush(self, batch: Sequence[Outcome]) -> int:
        """Settle ``batch``; returns how many parked deliveries it made due."""
        disable_after = timedelta(seconds=self._settings.disable_after_s)
        for attempt in range(1, _WRITE_TRIES + 1):
            try:
                async with self._engine.begin() as conn:
                    recorded = await outbox.record(conn, batch, self._clock(), disable_after)
                break
            except UNAVAILABLE as exc:
                log.warning(
                    "notify dispatcher: cannot settle %d outcomes (try %d): %s", len(batch), attempt, exc
                )
                await asyncio.sleep(_WRITE_RETRY_S * attempt)
        else:  # the leases expire and the rows are sent again: at least once
            log.error("notify dispatcher: dropped %d outcomes; their deliveries will be repeated", len(batch))
            return 0
        for gone in recorded.disabled:
            self._metrics.disabled.inc()
            log.warning("notify: subscription %s %s", gone.subscription_id, gone.reason)
        return recorded.freed

    async def _housekeeping(self, stop: asyncio.Event, transports: EndpointTransports) -> None:
        """Free rows parked by a race, refresh the queue-depth gauge, purge old rows, close idle pools."""
        s = self._settings
        purged_at = float("-inf")
        while not stop.is_set():
            await transports.sweep(set(self._in_flight))
            try:
                async with self._engine.begin() as conn:
                    freed = await outbox.unpark_heads(conn, self._clock())
                    self._metrics.queue_depth.set(await outbox.pending_count(conn))
                    if time.monotonic() - purged_at >= PURGE_EVERY_S:  # a scan of the log: rarely
                        purged_at = time.monotonic()
                        await outbox.purge(conn, self._clock() - timedelta(seconds=s.retention_s))
                if freed:  # woken once committed, or the claim would not see them yet
                    log.info("notify dispatcher: %d deliveries parked behind settled ones are due", freed)
                    self._wakeup.set()
            except UNAVAILABLE as exc:
                log.warning("notify dispatcher: housekeeping failed: %s", exc)
            await pause(stop, s.queue_depth_interval_s)


async def attach(wiring: Wiring) -> Role:
    """The dispatch role: sends webhooks and email from the outbox (scales out: claims are leases),
    and pushes alerts to the Alertmanagers when ``notify.alertmanager.urls`` names any."""
    notify = wiring.settings.notify
    dispatcher = Dispatcher(wiring.engine, notify, wiring.metrics, mailer=smtp_mailer(notify.smtp))
    if not notify.alertmanager.urls:
        return Role(background=(dispatcher.run,))
    pusher = AlertmanagerPusher(
        wiring.engine, notify.alertmanager, AlertmanagerMetrics.on(wiring.metrics.registry)
    )
    return Role(background=(dispatcher.run, pusher.run))
