"""The Alertmanager sink: pushes what :mod:`controller.store.alerts` holds to every configured
Alertmanager with ``POST /api/v2/alerts``.

One loop per Alertmanager, each on its own (one that is down never delays another). Every
loop, at start and then every ``resend_interval_s``, sends *all* firing alerts and the
resolves that Alertmanager has not taken; in between, woken through PostgreSQL ``NOTIFY``
(:data:`controller.store.alerts.WAKE_CHANNEL`) by the notify consumer, it sends only what
changed since its last accepted POST. A highly available Alertmanager pair gets every alert
twice, once each, and deduplicates notifications between its members by gossip.

What an answer means: ``2xx`` accepted (a resolve it took is recorded, and a resolve every
Alertmanager took is deleted); ``429``, ``5xx``, a timeout or a connection error: the same
POST is retried after a backoff (``retry_initial_s`` doubling up to ``retry_max_s``, jittered)
until it is accepted, so nothing is lost during an outage; another ``4xx``: the Alertmanager
refuses those alerts as they are, they are logged and counted (``rejected``) and not repeated
before the next full resend. Alertmanager URLs are set by the administrator, so the SSRF guard
of webhooks does not apply to them.

Several dispatchers (replicas) each push everything; Alertmanager keeps one alert per label
set, so that costs requests, never duplicate notifications.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import random
import time

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.notify.alerting import payload
from consumers.notify.metrics import AlertmanagerMetrics
from controller.contract.clock import Clock, first_of, pause, utcnow
from controller.contract.credentials import bearer_header, tls_context
from controller.contract.settings import AlertmanagerSettings
from controller.store import alerts, wakeups
from controller.store.alerts import Alert
from controller.store.engine import UNAVAILABLE

log = logging.getLogger(__name__)

PATH = "/api/v2/alerts"
USER_AGENT = "mpijob-controller-alertmanager/1"
_SNIPPET = 300


class AlertmanagerUnavailableError(Exception):
    """A POST that may succeed if repeated (unreachable, timed out, 429 or 5xx)."""


class AlertmanagerRejectedError(Exception):
    """A POST the Alertmanager refused as wrong (4xx): repeating it as is cannot help."""


_RETRIED: tuple[type[BaseException], ...] = (AlertmanagerUnavailableError, *UNAVAILABLE)


def auth_headers(settings: AlertmanagerSettings) -> dict[str, str]:
    """The ``Authorization`` header the settings ask for, from files read now (tokens rotate)."""
    if settings.bearer_token_file is not None:
        return bearer_header(settings.bearer_token_file)
    if settings.basic_auth_username is not None:
        password = ""
        if settings.basic_auth_password_file is not None:
            password = settings.basic_auth_password_file.read_text().rstrip("\n")
        pair = base64.b64encode(f"{settings.basic_auth_username}:{password}".encode()).decode()
        return {"authorization": f"Basic {pair}"}
    return {}


class AlertmanagerPusher:
    """Pushes the stored alerts to every Alertmanager of ``settings`` (see the module docstring)."""

    def __init__(
        self,
        engine: AsyncEngine,
        settings: AlertmanagerSettings,
        metrics: AlertmanagerMetrics,
        *,
        clock: Clock = utcnow,
        rng: random.Random | None = None,
    ) -> None:
        self._engine = engine
        self._settings = settings
        self._metrics = metrics
        self._clock = clock
        self._rng = rng or random.Random()
        self._wakeups = {url: asyncio.Event() for url in settings.urls}
        self.listening = asyncio.Event()
        """Set while a connection listens for the consumer's wake-ups."""

    def wake(self) -> None:
        """Send what changed now (an alert fired, changed or resolved)."""
        for event in self._wakeups.values():
            event.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Push until ``stop`` is set."""
        s = self._settings
        async with httpx.AsyncClient(
            verify=tls_context(s.ca_file),
            timeout=httpx.Timeout(s.timeout_s),
            headers={"user-agent": USER_AGENT},
        ) as client:
            loops = [asyncio.create_task(self._serve(url, client, stop)) for url in s.urls]
            helpers = [
                asyncio.create_task(
                    wakeups.listen(self._engine, alerts.WAKE_CHANNEL, self.wake, stop, self.listening)
                ),
                asyncio.create_task(self._gauge(stop)),
            ]
            try:
                await asyncio.gather(*loops)
            finally:
                for task in loops + helpers:
                    task.cancel()
                await asyncio.gather(*loops, *helpers, return_exceptions=True)

    async def _serve(self, url: str, client: httpx.AsyncClient, stop: asyncio.Event) -> None:
        """One Alertmanager: a full send every resend interval, changes in between, retries."""
        s = self._settings
        wakeup = self._wakeups[url]
        synced: int | None = None  # every change up to this number was sent
        full_at = float("-inf")
        failures = 0
        while not stop.is_set():
            wakeup.clear()
            full = time.monotonic() - full_at >= s.resend_interval_s
            try:
                sent = await self._push(url, client, None if full else synced)
            except _RETRIED as exc:
                failures += 1
                delay = min(s.retry_max_s, s.retry_initial_s * 2 ** (failures - 1))
                delay *= self._rng.uniform(0.8, 1.2)
                log.warning("alertmanager %s: %s; retrying in %.1f s (try %d)", url, exc, delay, failures)
                await pause(stop, delay)
                continue
            failures = 0
            if sent is not None:
                synced = max(synced or 0, sent)
            elif synced is None:
                synced = 0
            if full:
                full_at = time.monotonic()
            wait = max(0.0, full_at + s.resend_interval_s - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(first_of(wakeup, stop), wait)

    async def _push(self, url: str, client: httpx.AsyncClient, after: int | None) -> int | None:
        """Send what ``url`` is owed (changes numbered above ``after``, if given); returns the
        highest change number sent, ``None`` if there was nothing."""
        async with self._engine.connect() as conn:
            owed = await alerts.owed(conn, url, after)
        if not owed:
            return None
        s = self._settings
        for start in range(0, len(owed), s.max_batch):
            batch = owed[start : start + s.max_batch]
            try:
                await self._post(url, client, batch)
            except AlertmanagerRejectedError as exc:
                log.error("alertmanager %s refused %d alert(s): %s", url, len(batch), exc)
                continue
            if any(a.ends_at is not None for a in batch):
                async with self._engine.begin() as conn:
                    await alerts.resolve_taken(conn, url, batch)
                    await alerts.purge_resolved(conn, s.urls)
        return max(a.change for a in owed)

    async def _post(self, url: str, client: httpx.AsyncClient, batch: list[Alert]) -> None:
        now = self._clock()
        body = [payload(alert, now, self._settings.resend_interval_s) for alert in batch]
        started = time.perf_counter()
        m = self._metrics
        try:
            headers = auth_headers(self._settings)
            response = await client.post(url + PATH, json=body, headers=headers)
        except (httpx.HTTPError, OSError) as exc:  # OSError: a credential file unreadable, fixable
            m.requests.labels(url, "retry").inc()
            m.up.labels(url).set(0)
            raise AlertmanagerUnavailableError(f"{type(exc).__name__}: {exc or 'failed'}") from exc
        finally:
            m.request_seconds.labels(url).observe(time.perf_counter() - started)
        status = response.status_code
        if 200 <= status < 300:
            m.requests.labels(url, "sent").inc()
            m.up.labels(url).set(1)
            m.alerts_sent.labels(url).inc(len(batch))
            return
        answer = response.text[:_SNIPPET].strip()
        if status == 429 or status >= 500:
            m.requests.labels(url, "retry").inc()
            m.up.labels(url).set(0)
            raise AlertmanagerUnavailableError(f"HTTP {status}: {answer}")
        m.requests.labels(url, "rejected").inc()
        m.up.labels(url).set(1)  # it answers: a wrong alert is not an outage
        raise AlertmanagerRejectedError(f"HTTP {status}: {answer}")

    async def _gauge(self, stop: asyncio.Event) -> None:
        """Refresh the alerts-held gauge now and then."""
        interval = min(self._settings.resend_interval_s, 15.0)
        while not stop.is_set():
            try:
                async with self._engine.connect() as conn:
                    firing, resolving = await alerts.counts(conn)
                self._metrics.alerts.labels("firing").set(firing)
                self._metrics.alerts.labels("resolving").set(resolving)
            except UNAVAILABLE as exc:
                log.warning("alertmanager sink: cannot count alerts: %s", exc)
            await pause(stop, interval)
