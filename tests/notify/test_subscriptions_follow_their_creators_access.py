"""A subscription delivers only while its creator may read where it points.

Kubernetes mode end to end: the creator authenticates by TokenReview and is authorized by
SubjectAccessReview (the simulated API server, through the real gateway); jobs go through real
NATS, the notify consumer and the dispatcher to a real HTTP receiver. Revoking the creator's
RoleBinding suspends the subscription at the next re-check once the cached grant has expired
(visible in the API and in ``mpijc_subscriptions``), and restoring it resumes deliveries. The
static mode's equivalent — the user's ``namespaces`` list — runs without the bus.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api import notifications as notifications_api
from controller.api.access import AccessReviewer, CachedAccess, StaticAccess
from controller.api.app import create_app, metrics_app
from controller.api.rechecks import CreatorRecheck, Rechecked
from controller.contract.settings import Settings
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import KubeAccessReviewer
from controller.metrics import PipelineMetrics
from controller.store import outbox
from controller.testing.notify import job, settled_log, subscribe, with_notify
from controller.testing.receivers import Receiver
from controller.testing.simcluster import SimCluster
from tests.api_fixtures import USERS, bearer
from tests.clocks import ManualClock
from tests.notify.test_outbox_parks_deliveries_behind_pending_ones import claimable, row
from tests.notify_fixtures import Notifying

ALICE = {"username": "alice", "uid": "u-alice", "groups": ["team-a", "system:authenticated"]}
OPS = {"username": "ops", "uid": "u-ops", "groups": ["sre"]}
TOKENS = {"alice-token": ALICE, "ops-token": OPS}
OPS_GRANT = ("group:sre", "mpijobs", "*", "list,create,update")
ALICE_GRANT = ("group:team-a", "mpijobs", "team-a", "list,create")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def reviewer(sim: SimCluster, clock: ManualClock) -> Iterator[CachedAccess]:
    sim.set_access(TOKENS, [OPS_GRANT, ALICE_GRANT])
    with KubeGateway.for_url(sim.url) as gateway:
        yield CachedAccess(KubeAccessReviewer(gateway), ttl_s=30, clock=clock, denied_ttl_s=60)


def apps(settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics, reviewer: AccessReviewer) -> Any:
    app = create_app(
        engine, metrics, reviewer, webhooks_router=notifications_api.build_router(settings.notify)
    )
    return app, metrics_app(app)


def client(app: Any, token: str | None = None) -> httpx.AsyncClient:
    headers = bearer(token) if token else {}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api", headers=headers)


async def suspended_gauge(scraper: httpx.AsyncClient) -> list[str]:
    text = (await scraper.get("/metrics")).text
    return [line for line in text.splitlines() if line.startswith("mpijc_subscriptions{")]


async def test_revoked_creator_s_subscription_is_suspended_and_resumes_when_access_returns(
    notifying: Notifying,
    sim: SimCluster,
    reviewer: CachedAccess,
    clock: ManualClock,
) -> None:
    with_notify(notifying.settings)
    app, metrics_port = apps(notifying.settings, notifying.engine, notifying.metrics, reviewer)
    recheck = CreatorRecheck(notifying.engine, reviewer, interval_s=60)
    failed = ["job.failed"]
    async with (
        Receiver() as rx,
        client(app, "alice-token") as alice,
        client(app, "ops-token") as ops,
        client(metrics_port) as scraper,
        notifying.running(),
    ):
        sub = await subscribe(alice, rx, "alice", namespace="team-a", event_types=failed)
        await subscribe(ops, rx, "ops", namespace="team-a", event_types=failed)
        assert await recheck.round() == Rechecked()

        sim.set_access(TOKENS, [OPS_GRANT])  # alice's RoleBinding is gone
        clock.now = 29  # her grant is still cached: nothing changes yet
        assert await recheck.round() == Rechecked()
        clock.now = 31
        assert await recheck.round() == Rechecked(suspended=(sub["id"],))
        assert await recheck.round() == Rechecked(), "suspended once"

        seen = (await ops.get(f"/api/v1/webhooks/{sub['id']}")).json()
        listed = (await ops.get("/api/v1/webhooks", params={"state": "suspended"})).json()["items"]
        gauge = await suspended_gauge(scraper)
        refused = await ops.patch(f"/api/v1/webhooks/{sub['id']}", json={"state": "active"})
        await notifying.publish(
            job("Running", name="while", change="ADDED"),
            job("Failed", name="while"),
        )
        await rx.wait_for("ops", 1)  # the consumer matched this event: had alice's matched, it was owed too
        while_suspended = await settled_log(ops, sub["id"], 0)

        sim.set_access(TOKENS, [OPS_GRANT, ALICE_GRANT])
        clock.now = 92  # the denial is kept 60 s
        assert await recheck.round() == Rechecked(resumed=(sub["id"],))
        resumed = (await alice.get(f"/api/v1/webhooks/{sub['id']}")).json()
        await notifying.publish(
            job("Running", name="after", change="ADDED"),
            job("Failed", name="after"),
        )
        (delivered,) = await rx.wait_for("alice", 1)
        await rx.wait_for("ops", 2)

    reason = (
        "suspended: its creator alice may no longer list MPIJobs or TrainJobs in namespace 'team-a'; "
        "it resumes by itself once they may again"
    )
    assert (seen["state"], seen["disabled_reason"]) == ("suspended", reason)
    assert [n["kind"] for n in seen["notices"]] == ["suspended"]
    assert [s["id"] for s in listed] == [sub["id"]]
    assert 'mpijc_subscriptions{channel="webhook",state="suspended"} 1.0' in gauge
    assert 'mpijc_subscriptions{channel="webhook",state="active"} 1.0' in gauge
    assert refused.status_code == 409 and refused.json()["detail"] == f"subscription {sub['id']} is {reason}"
    assert while_suspended == [] and rx.at("ops")[0].payload["data"]["job"]["name"] == "while"
    assert (resumed["state"], resumed["disabled_reason"]) == ("active", None)
    assert [n["kind"] for n in resumed["notices"]] == ["resumed", "suspended"]
    assert delivered.verified and delivered.payload["data"]["job"]["name"] == "after"


async def test_the_review_of_a_creator_is_not_guessed_while_the_api_server_is_down(
    settings: Settings,
    engine: AsyncEngine,
    metrics: PipelineMetrics,
    sim: SimCluster,
    reviewer: CachedAccess,
    clock: ManualClock,
) -> None:
    """An outage of the API server must not silence every subscription: nothing changes."""
    with_notify(settings)
    app, _ = apps(settings, engine, metrics, reviewer)
    async with client(app, "alice-token") as alice:
        created = await alice.post(
            "/api/v1/webhooks", json={"url": "https://93.184.215.14/hook", "namespace": "team-a"}
        )
    assert created.status_code == 201, created.text
    clock.now = 31  # the grant cached when she subscribed has expired
    sim.outage()
    try:
        assert await CreatorRecheck(engine, reviewer, 60).round() == Rechecked(unanswered=1)
    finally:
        sim.end_outage()


async def created_by_alice(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> dict[str, Any]:
    """A webhook for team-a that alice, a static user, created (fast notification timings)."""
    with_notify(settings)
    app, _ = apps(settings, engine, metrics, StaticAccess(USERS))
    async with client(app, "token-alice") as alice:
        answer = await alice.post(
            "/api/v1/webhooks", json={"url": "https://93.184.215.14/h", "namespace": "team-a"}
        )
    created: dict[str, Any] = answer.json()
    return created


async def test_static_users_are_re_checked_against_their_namespaces_list(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    """With ``api.auth=static``, a token whose ``namespaces`` no longer list the namespace (or a
    token removed from ``MPIJC_API__TOKENS``) suspends what its user created, at the next
    re-check after the restart that changed the settings."""
    created = await created_by_alice(settings, engine, metrics)
    narrowed = {**USERS, "token-alice": USERS["token-alice"].model_copy(update={"namespaces": []})}
    removed = {token: user for token, user in USERS.items() if user.username != "alice"}

    assert await CreatorRecheck(engine, StaticAccess(narrowed), 60).round() == Rechecked(
        suspended=(created["id"],)
    )
    assert await CreatorRecheck(engine, StaticAccess(USERS), 60).round() == Rechecked(
        resumed=(created["id"],)
    )
    assert await CreatorRecheck(engine, StaticAccess(removed), 60).round() == Rechecked(
        suspended=(created["id"],)
    )

    app, _ = apps(settings, engine, metrics, StaticAccess(removed))
    async with client(app, "token-admin") as admin:
        shown = (await admin.get(f"/api/v1/webhooks/{created['id']}")).json()
        disabling = await admin.patch(f"/api/v1/webhooks/{created['id']}", json={"state": "disabled"})
    assert shown["state"] == "suspended"
    assert disabling.status_code == 200 and disabling.json()["state"] == "disabled"
    assert await CreatorRecheck(engine, StaticAccess(USERS), 60).round() == Rechecked(), (
        "disabled stays disabled"
    )


async def test_what_was_queued_before_the_suspension_waits_for_the_resumption(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    """Deliveries owed when the creator lost access are held, not sent; they go out if it resumes."""
    created = await created_by_alice(settings, engine, metrics)
    async with engine.begin() as conn:
        await outbox.enqueue(conn, [row(created["id"], "uid-1", "job.failed")])
    narrowed = {**USERS, "token-alice": USERS["token-alice"].model_copy(update={"namespaces": []})}

    await CreatorRecheck(engine, StaticAccess(narrowed), 60).round()
    held = await claimable(engine)
    await CreatorRecheck(engine, StaticAccess(USERS), 60).round()
    assert (held, await claimable(engine)) == ([], [("uid-1", "job.failed")])
