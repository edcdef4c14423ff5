"""Notifications under test: the real consumer and dispatcher on the test's NATS and PostgreSQL,
subscriptions made through the real API, and real receivers (HTTP on loopback, aiosmtpd).

Timings are shrunk (retries after 50 ms, 1 s request timeout, 50 ms polls) and loopback is
allowlisted, since the SSRF guard refuses it by default. Thresholds that are long in
production (auto-disable, digest windows) are crossed with a :class:`ManualClock`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from nats.js import JetStreamContext
from sqlalchemy.ext.asyncio import AsyncEngine

from consumers.notify import Mailer, durables, prepare
from consumers.notify.dispatch import Dispatcher
from controller.api import notifications as notifications_api
from controller.api.access import AccessReviewer, OpenAccess
from controller.api.app import create_app
from controller.api.limits import SubscriptionQuotas
from controller.bus.consuming import consuming
from controller.bus.publishing import Publisher
from controller.bus.streams import connect
from controller.contract.egress import Resolver, system_resolver
from controller.contract.events import JobObserved, JobRef
from controller.contract.findings import (
    Evidence,
    Finding,
    RuleId,
    Severity,
    dedup_key,
    doc_anchor,
    finding_id,
)
from controller.contract.settings import NotifySettings, Settings
from controller.contract.subjects import Topology
from controller.metrics import PipelineMetrics
from controller.testing import events as eb
from controller.testing.receivers import Receiver
from controller.testing.waits import running_until_exit, until

FAST = {
    "allow_cidrs": ["127.0.0.0/8"],
    "retry_schedule_s": [0.05, 0.05],
    "retry_jitter": 0.0,
    "request_timeout_s": 1.0,
    "poll_interval_s": 0.05,
    "lease_s": 10.0,
    "queue_depth_interval_s": 0.1,
}


def with_notify(settings: Settings, **overrides: Any) -> Settings:
    """``settings`` with fast notification timings (and ``overrides``)."""
    settings.notify = NotifySettings(**{**FAST, **overrides})
    return settings


def offline_settings(**overrides: Any) -> Settings:
    """Settings for tests that never reach PostgreSQL or NATS (no per-test database is made)."""
    return with_notify(Settings(_env_file=None), **overrides)


@dataclass
class ManualClock:
    """The time the consumer, dispatcher and API see; the test moves it."""

    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@contextlib.asynccontextmanager
async def consumer_running(
    settings: Settings,
    topology: Topology,
    js: JetStreamContext,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    *,
    clock: Callable[[], datetime] | None = None,
    wake: Callable[[], None] = lambda: None,
) -> AsyncIterator[None]:
    """The notify consumer on a connection of its own (``wake``: an in-process dispatcher)."""
    assert settings.nats.url
    await prepare(js, topology, settings.consumer)
    nc = await connect(settings.nats.url, "tests-notify")
    notify = durables(topology, settings.notify, engine, metrics, clock or (lambda: datetime.now(UTC)), wake)
    try:
        async with consuming(nc, topology, settings.consumer, notify, metrics):
            yield
    finally:
        await nc.close()


@contextlib.asynccontextmanager
async def dispatcher_running(
    settings: Settings,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    *,
    clock: Callable[[], datetime] | None = None,
    mailer: Mailer | None = None,
    resolver: Resolver = system_resolver,
) -> AsyncIterator[Dispatcher]:
    """A dispatcher running until the block ends, then finishing what it has in flight."""
    now = clock or (lambda: datetime.now(UTC))
    dispatcher = Dispatcher(engine, settings.notify, metrics, mailer=mailer, resolver=resolver, clock=now)
    async with running_until_exit(dispatcher.run):
        yield dispatcher


@contextlib.asynccontextmanager
async def api_client(
    settings: Settings,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    *,
    reviewer: AccessReviewer | None = None,
    resolver: Resolver = system_resolver,
    clock: Callable[[], datetime] | None = None,
) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the API, its webhooks router resolving and telling time as told, with the
    subscription quotas ``settings`` configure."""
    app = create_app(
        engine,
        metrics,
        reviewer or OpenAccess(),
        webhooks_router=notifications_api.build_router(
            settings.notify,
            resolver=resolver,
            clock=clock,
            quotas=SubscriptionQuotas.from_settings(settings.notify),
        ),
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://api") as client:
        yield client


async def subscribe(api: httpx.AsyncClient, receiver: Receiver, path: str, **fields: Any) -> dict[str, Any]:
    """A webhook subscription to ``receiver``'s ``path``, its secret registered with the receiver."""
    response = await api.post("/api/v1/webhooks", json={"url": receiver.url(path), **fields})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    receiver.secrets[path] = created["secret"]
    return created


async def log_of(api: httpx.AsyncClient, subscription_id: str, **params: Any) -> list[dict[str, Any]]:
    """The delivery log, newest first."""
    response = await api.get(f"/api/v1/webhooks/{subscription_id}/deliveries", params=params)
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


async def settled_log(api: httpx.AsyncClient, subscription_id: str, count: int) -> list[dict[str, Any]]:
    """The delivery log once it holds ``count`` deliveries and none is pending any more."""
    found: list[dict[str, Any]] = []

    async def settled() -> bool:
        nonlocal found
        found = await log_of(api, subscription_id)
        return len(found) >= count and all(d["status"] != "pending" for d in found)

    await until(settled)
    return found


async def attempted(api: httpx.AsyncClient, subscription_id: str, attempts: int) -> None:
    """Wait until the newest delivery has ``attempts`` settled attempts (before moving a clock on)."""

    async def settled() -> bool:
        log = await log_of(api, subscription_id)
        return bool(log) and len(log[0]["attempt_log"]) >= attempts

    await until(settled)


def job(
    phase: str, *, name: str = "pi", namespace: str = "team-a", change: str = "MODIFIED", **kw: Any
) -> JobObserved:
    """A job observation of ``namespace/name`` (uid derived from both)."""
    ref = JobRef(uid=f"uid-{namespace}-{name}", kind="MPIJob", namespace=namespace, name=name)
    return eb.job(phase, job=ref, change=change, **kw)  # type: ignore[arg-type]


async def publish_jobs(js: JetStreamContext, topology: Topology, *events: JobObserved) -> None:
    await Publisher(js, topology).publish(list(events))


def finding(
    of: JobObserved,
    rule: RuleId = "oom",
    *,
    status: str = "firing",
    revision: int = 1,
    severity: Severity = "critical",
) -> Finding:
    """A finding about the job ``of`` was observed as."""
    at = of.observed_at
    return Finding(
        id=finding_id(of.uid, rule),
        rule=rule,
        severity=severity,
        status=status,
        job=of.ref,
        root_cause="Worker 2 failed: out of memory (limit 16Gi)",
        evidence=(Evidence(source="pod/pi-worker-2", field="containers[worker].reason", value="OOMKilled"),),
        remediation=("Increase the worker memory limit", "Reduce the per-rank batch size"),
        doc_anchor=doc_anchor(rule),
        dedup_key=dedup_key(of.uid, rule),
        revision=revision,
        first_seen=at,
        last_seen=at + timedelta(seconds=revision),
        resolved_at=at + timedelta(minutes=5) if status == "resolved" else None,
    )


async def publish_findings(js: JetStreamContext, topology: Topology, *findings: Finding) -> None:
    await Publisher(js, topology).publish_findings(findings)
