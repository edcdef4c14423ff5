"""The notify pipeline of one test: its settings, streams, database and metrics bundled as one
fixture, :func:`notifying`, that starts the API, the consumer and dispatcher, and a receiver."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.notify import SmtpMailer
from consumers.notify.alertmanager import AlertmanagerPusher
from consumers.notify.dispatch import Dispatcher
from controller.contract.events import JobObserved
from controller.contract.findings import Finding
from controller.contract.settings import AlertmanagerSettings
from controller.store import outbox
from controller.testing.alertmanager import pusher_running
from controller.testing.notify import (
    ManualClock,
    api_client,
    consumer_running,
    dispatcher_running,
    publish_findings,
    publish_jobs,
    subscribe,
    with_notify,
)
from controller.testing.receivers import Receiver, SmtpSink
from tests.conftest import Stage


@dataclass
class Notifying(Stage):
    """What the notify consumer, its dispatcher and the API of one test share."""

    def api(self, **options: Any) -> contextlib.AbstractAsyncContextManager[httpx.AsyncClient]:
        """An HTTP client of the API (``options``: those of :func:`api_client`)."""
        return api_client(self.settings, self.engine, self.metrics, **options)

    @contextlib.asynccontextmanager
    async def running(self, **options: Any) -> AsyncIterator[Dispatcher]:
        """The notify consumer and a dispatcher beside it that it wakes, as one process runs them
        (``options``: those of :func:`dispatcher_running`: a clock, a mailer, a resolver)."""
        async with (
            dispatcher_running(self.settings, self.engine, self.metrics, **options) as dispatcher,
            self.consuming(clock=options.get("clock"), wake=dispatcher.wake),
        ):
            yield dispatcher

    def consuming(self, **options: Any) -> contextlib.AbstractAsyncContextManager[None]:
        """The notify consumer alone (``options``: those of :func:`consumer_running`)."""
        return consumer_running(self.settings, self.topology, self.js, self.engine, self.metrics, **options)

    def pushing(
        self, sink: AlertmanagerSettings | None = None
    ) -> contextlib.AbstractAsyncContextManager[AlertmanagerPusher]:
        """The Alertmanager pusher, to ``sink`` or else the Alertmanagers the settings name."""
        return pusher_running(self.engine, sink or self.settings.notify.alertmanager, self.metrics)

    def sample(self, name: str, labels: dict[str, str]) -> float | None:
        """The value of one series of the pipeline's metrics, or ``None`` where it has none yet."""
        return self.metrics.registry.get_sample_value(name, labels)

    async def publish_findings(self, *findings: Finding) -> None:
        """Findings on this test's stream, as the rules consumer publishes them."""
        await publish_findings(self.js, self.topology, *findings)

    async def publish(self, *events: JobObserved) -> None:
        """Observations of jobs on this test's stream, as the watcher publishes them."""
        await publish_jobs(self.js, self.topology, *events)

    @contextlib.asynccontextmanager
    async def serving(self, **notify: Any) -> AsyncIterator[tuple[Receiver, httpx.AsyncClient]]:
        """A receiver, the API and the pipeline running, with fast timings and the ``notify`` settings."""
        with_notify(self.settings, **notify)
        async with Receiver() as rx, self.api() as api, self.running():
            yield rx, api

    @contextlib.asynccontextmanager
    async def mailing(
        self, sink: SmtpSink, clock: ManualClock | None = None, **notify: Any
    ) -> AsyncIterator[httpx.AsyncClient]:
        """The API and the pipeline running (on ``clock``), mailing through ``sink``, with fast
        timings and the ``notify`` settings; the API's client."""
        with_notify(self.settings, smtp=sink.settings, **notify)
        mailer = SmtpMailer(self.settings.notify.smtp)
        async with self.api(clock=clock) as api, self.running(clock=clock, mailer=mailer):
            yield api


@pytest.fixture
def notifying(stage: Stage) -> Notifying:
    """This test's notify pipeline, started by the test where it needs it."""
    return Notifying(stage.settings, stage.topology, stage.js, stage.engine, stage.metrics)


def outbox_row(
    subscription_id: str, job_uid: str, event: str, at: datetime, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """An outbox row as the notify consumer writes it, due and made at ``at`` (``body``: the
    event's, ``{"type": event}`` unless given)."""
    return {
        "id": outbox.delivery_id(subscription_id, f"{event}:{job_uid}"),
        "subscription_id": subscription_id,
        "channel": "webhook",
        "event_type": event,
        "order_key": job_uid,
        "namespace": "team-a",
        "job_name": job_uid,
        "job_uid": job_uid,
        "body": json.dumps(body or {"type": event}),
        "status": "pending",
        "attempts": 0,
        "next_attempt_at": at,
        "event_at": at,
        "created_at": at,
    }


async def enqueued(engine: AsyncEngine, rows: list[dict[str, Any]]) -> set[str]:
    """``rows`` put in the outbox in a transaction of their own; the ids that were new."""
    async with engine.begin() as conn:
        return await outbox.enqueue(conn, rows)


@pytest.fixture
async def subscription(notifying: Notifying) -> str:
    """The id of a webhook subscription made through the API (to a receiver gone since)."""
    with_notify(notifying.settings)
    async with Receiver() as rx, notifying.api() as api:
        created = await subscribe(api, rx, "ci")
    return str(created["id"])
