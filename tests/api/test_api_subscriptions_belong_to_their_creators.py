"""Subscriptions belong to whoever created them: others may read them (with the webhook URL cut to
its scheme and host), change them only if allowed to update jobs in the namespace, not see them
at all without read access (404, as if they did not exist), and nobody may pile them up (quotas).
Lists page the same way as every other list, the old ``after``/``before``/``next`` still working.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, cast

import httpx
import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import CachedAccess, Principal, StaticAccess
from controller.api.app import create_app
from controller.api.limits import DEFAULT_QUOTAS, SubscriptionQuotas
from controller.api.visible_runs import RUNS
from controller.contract.settings import NotifySettings, StaticUser
from controller.kube.gateway import KubeGateway
from controller.kube.reviews import LISTED, KubeAccessReviewer
from controller.metrics import PipelineMetrics
from controller.store import subscriptions
from controller.store.models import DeliveryAttemptRow, DeliveryRow

HOOK = "http://127.0.0.1:9/services/T000/B000/XXXXXXXXsecretXXXXXXXX?token=abc"
ORIGIN = "http://127.0.0.1:9"
LIST = "/api/v1/webhooks?namespace=team-a"
USERS = {
    "t-alice": StaticUser(username="alice", namespaces=["team-a"]),
    "t-rita": StaticUser(username="rita", namespaces=["team-a"]),  # reads team-a, updates nothing
    "t-uma": StaticUser(username="uma", namespaces=["team-a"]),  # reads and updates team-a
    "t-bob": StaticUser(username="bob", namespaces=["team-b"]),
    "t-admin": StaticUser(username="admin", namespaces=["*"]),
}
UPDATERS = {"uma": {"team-a"}, "admin": {"*"}}


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ALICE, RITA, UMA, BOB, ADMIN = (as_(t) for t in ("t-alice", "t-rita", "t-uma", "t-bob", "t-admin"))


class SplitAccess(StaticAccess):
    """Static tokens for reading; update rights from a table of their own, as RBAC can grant them."""

    def __init__(self, tokens: Mapping[str, StaticUser], updaters: Mapping[str, set[str]]) -> None:
        super().__init__(tokens)
        self._updaters = updaters

    async def can_update(self, principal: Principal, namespace: str | None) -> bool:
        allowed = self._updaters.get(principal.username, set())
        return "*" in allowed or (namespace is not None and namespace in allowed)

    async def can_subscribe(self, principal: Principal, namespace: str | None) -> bool:
        return await self.can_list(
            principal, namespace
        )  # here: who reads may create jobs (RBAC can grant create without update)


def client(engine: AsyncEngine, quotas: SubscriptionQuotas = DEFAULT_QUOTAS) -> httpx.AsyncClient:
    app = create_app(
        engine,
        PipelineMetrics(),
        SplitAccess(USERS, UPDATERS),
        notify=NotifySettings(allow_cidrs=["127.0.0.0/8"]),
        quotas=quotas,
    )
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


@pytest.fixture
async def api(engine: AsyncEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with client(engine) as c:
        yield c


async def subscribe(api: httpx.AsyncClient, who: dict[str, str], **fields: Any) -> dict[str, Any]:
    created = await api.post(
        "/api/v1/webhooks", json={"url": HOOK, "namespace": "team-a", **fields}, headers=who
    )
    assert created.status_code == 201, created.text
    body: dict[str, Any] = created.json()
    return body


async def add_deliveries(engine: AsyncEngine, subscription_id: str, count: int) -> list[str]:
    """Dead (failed) deliveries of the subscription, oldest first: their ids."""
    at = datetime(2026, 11, 20, 10, tzinfo=UTC)
    rows = [
        {
            "id": f"msg_{uuid.uuid4().hex}",
            "subscription_id": subscription_id,
            "channel": "webhook",
            "event_type": "job.failed",
            "order_key": "team-a/pi",
            "namespace": "team-a",
            "job_name": "pi",
            "job_uid": f"uid-{n}",
            "body": "{}",
            "status": "failed",
            "attempts": 1,
            "next_attempt_at": at,
            "event_at": at,
            "created_at": at,
            "finished_at": at,
        }
        for n in range(count)
    ]
    async with engine.begin() as conn:
        await conn.execute(insert(DeliveryRow), rows)
    return [str(r["id"]) for r in rows]


async def test_only_the_creator_or_someone_who_may_update_jobs_there_changes_a_subscription(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    sub = await subscribe(api, ALICE, label_selector="   ")
    url = f"/api/v1/webhooks/{sub['id']}"
    (delivery,) = await add_deliveries(engine, sub["id"], 1)
    redeliver = f"/api/v1/deliveries/{delivery}/redeliver"

    rita = [
        await api.patch(url, json={"description": "mine now"}, headers=RITA),
        await api.post(f"{url}/rotate-secret", headers=RITA),
        await api.post(redeliver, headers=RITA),
        await api.delete(url, headers=RITA),
    ]
    assert [r.status_code for r in rita] == [403] * 4
    assert rita[0].json()["detail"] == (
        f"rita may not change subscription {sub['id']}: only its creator or someone allowed to update "
        "MPIJobs or TrainJobs in namespace 'team-a' may"
    )
    assert (await api.get(url, headers=RITA)).status_code == 200, "reading is still allowed"

    uma = await api.patch(url, json={"description": "tuned by uma"}, headers=UMA)
    assert uma.status_code == 200 and uma.json()["description"] == "tuned by uma"
    assert (await api.post(f"{url}/rotate-secret", headers=UMA)).status_code == 200
    assert (await api.post(redeliver, headers=UMA)).status_code == 202

    assert sub["label_selector"] is None, "blank padding is no selector, not one that matches all"
    assert (await api.patch(url, json={"state": "disabled"}, headers=ALICE)).status_code == 200
    assert (await api.delete(url, headers=ALICE)).status_code == 204


async def test_a_static_token_without_manage_only_reads(engine: AsyncEngine) -> None:
    users = {
        "t-alice": StaticUser(username="alice", namespaces=["team-a"], manage=["team-a"]),
        "t-reader": StaticUser(username="reader", namespaces=["team-a"]),
    }
    app = create_app(
        engine, PipelineMetrics(), StaticAccess(users), notify=NotifySettings(allow_cidrs=["127.0.0.0/8"])
    )
    reader = as_("t-reader")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        sub = await subscribe(api, ALICE)
        url = f"/api/v1/webhooks/{sub['id']}"
        (delivery,) = await add_deliveries(engine, sub["id"], 1)
        writes = [
            await api.post("/api/v1/webhooks", json={"url": HOOK, "namespace": "team-a"}, headers=reader),
            await api.patch(url, json={"description": "mine now"}, headers=reader),
            await api.post(f"{url}/rotate-secret", headers=reader),
            await api.post(f"/api/v1/deliveries/{delivery}/redeliver", headers=reader),
            await api.delete(url, headers=reader),
        ]
        reads = [
            await api.get(url, headers=reader),
            await api.get(LIST, headers=reader),
            await api.get(f"{url}/deliveries", headers=reader),
        ]
        async with engine.begin() as conn:  # made before the token lost the right to manage
            await subscriptions.update_subscription(conn, sub["id"], {"created_by": "reader"})
        own = await api.patch(url, json={"description": "still mine?"}, headers=reader)
        kept = await api.get(url, headers=ALICE)

    assert [r.status_code for r in writes] == [403] * 5
    assert writes[0].json()["detail"] == (
        "reader has read-only access to namespace 'team-a': may not create or change subscriptions there"
    )
    assert [r.status_code for r in reads] == [200] * 3
    assert [s["id"] for s in reads[1].json()["items"]] == [sub["id"]]
    assert own.status_code == 403, "read-only covers the token's own subscriptions too"
    assert kept.status_code == 200 and kept.json()["description"] == sub["description"]


async def test_only_the_creator_sees_the_whole_webhook_url(api: httpx.AsyncClient) -> None:
    sub = await subscribe(api, ALICE)
    url = f"/api/v1/webhooks/{sub['id']}"
    assert sub["url"] == HOOK
    assert (await api.get(url, headers=ALICE)).json()["url"] == HOOK
    assert (await api.get(LIST, headers=ALICE)).json()["items"][0]["url"] == HOOK

    for who in (RITA, UMA, ADMIN):
        assert (await api.get(url, headers=who)).json()["url"] == ORIGIN
        assert (await api.get(LIST, headers=who)).json()["items"][0]["url"] == ORIGIN
    changed = await api.patch(url, json={"description": "x"}, headers=UMA)
    assert changed.json()["url"] == ORIGIN
    assert (await api.get(url, headers=ALICE)).json()["url"] == HOOK, "a change by another keeps the URL"


async def test_only_the_creator_sees_the_webhook_url_in_the_delivery_log(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    sub = await subscribe(api, ALICE)
    (delivery,) = await add_deliveries(engine, sub["id"], 1)
    echoed = "Cannot POST /services/T000/B000/XXXXXXXXsecretXXXXXXXX?token=abc (404)"
    async with engine.begin() as conn:
        seq = (await conn.execute(select(DeliveryRow.seq).where(DeliveryRow.id == delivery))).scalar_one()
        await conn.execute(update(DeliveryRow).where(DeliveryRow.seq == seq).values(last_error=echoed))
        await conn.execute(
            insert(DeliveryAttemptRow).values(
                delivery_seq=seq, attempt=1, at=datetime.now(UTC), outcome="failed", latency_ms=1.0,
                error=f"POST {HOOK} failed; path /services/T000/B000/XXXXXXXXsecretXXXXXXXX",
            )
        )  # fmt: skip
    log = f"/api/v1/webhooks/{sub['id']}/deliveries"

    (own,) = (await api.get(log, headers=ALICE)).json()["items"]
    assert own["last_error"] == echoed and HOOK in own["attempt_log"][0]["error"]
    for who in (RITA, UMA, ADMIN):
        (seen,) = (await api.get(log, headers=who)).json()["items"]
        assert "secret" not in seen["last_error"] and "token=abc" not in seen["last_error"], seen
        assert seen["last_error"].startswith("Cannot POST [REDACTED]")
        (attempt,) = seen["attempt_log"]
        assert "secret" not in attempt["error"] and attempt["error"].startswith(f"POST {ORIGIN} failed")
    redelivered = await api.post(f"/api/v1/deliveries/{delivery}/redeliver", headers=UMA)
    assert redelivered.status_code == 202 and "secret" not in redelivered.json()["last_error"]


async def test_a_subscription_bob_may_not_read_is_404_like_a_missing_one(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    sub = await subscribe(api, ALICE)
    (delivery,) = await add_deliveries(engine, sub["id"], 1)
    missing_sub, missing_delivery = f"sub_{uuid.uuid4().hex}", f"msg_{uuid.uuid4().hex}"

    def calls(sub_id: str, delivery_id: str) -> list[tuple[str, str]]:
        return [
            ("GET", f"/api/v1/webhooks/{sub_id}"),
            ("PATCH", f"/api/v1/webhooks/{sub_id}"),
            ("DELETE", f"/api/v1/webhooks/{sub_id}"),
            ("POST", f"/api/v1/webhooks/{sub_id}/rotate-secret"),
            ("GET", f"/api/v1/webhooks/{sub_id}/deliveries"),
            ("POST", f"/api/v1/deliveries/{delivery_id}/redeliver"),
        ]

    for (method, there), (_, nowhere) in zip(
        calls(sub["id"], delivery), calls(missing_sub, missing_delivery), strict=True
    ):
        body = {} if method == "PATCH" else None
        hidden = await api.request(method, there, headers=BOB, json=body)
        absent = await api.request(method, nowhere, headers=BOB, json=body)
        assert hidden.status_code == absent.status_code == 404, there
        assert (
            hidden.text.replace(sub["id"], missing_sub).replace(delivery, missing_delivery) == absent.text
        ), there
    assert (await api.get("/api/v1/webhooks/" + sub["id"], headers=ALICE)).status_code == 200


async def test_quotas_cap_subscriptions_per_user_and_per_namespace(engine: AsyncEngine) -> None:
    async with client(engine, replace(DEFAULT_QUOTAS, per_user=2, per_namespace=3)) as api:
        first, _ = [await subscribe(api, ALICE) for _ in range(2)]
        third = await api.post("/api/v1/webhooks", json={"url": HOOK, "namespace": "team-a"}, headers=ALICE)
        await subscribe(api, UMA)
        full = await api.post("/api/v1/webhooks", json={"url": HOOK, "namespace": "team-a"}, headers=UMA)
        elsewhere = await api.post("/api/v1/webhooks", json={"url": HOOK}, headers=ADMIN)

        async with engine.begin() as conn:
            await subscriptions.update_subscription(conn, first["id"], {"state": "expired"})
        again = await api.post("/api/v1/webhooks", json={"url": HOOK, "namespace": "team-a"}, headers=ALICE)
        revived = await api.patch(f"/api/v1/webhooks/{first['id']}", json={"state": "active"}, headers=ALICE)

    assert third.status_code == 429
    assert third.json()["detail"] == (
        "alice already has 2 subscriptions, the most one user may have (2); delete some first "
        "(expired ones do not count)"
    )
    assert full.status_code == 429
    assert full.json()["detail"] == (
        "there are already 3 subscriptions in namespace 'team-a', the most allowed (3); delete some "
        "first (expired ones do not count)"
    )
    assert elsewhere.status_code == 201, "cluster-wide subscriptions count on their own"
    assert again.status_code == 201, "an expired subscription does not count"
    assert revived.status_code == 429, "re-activating an expired one counts again"


async def test_subscriptions_and_deliveries_page_with_cursors_and_the_old_parameters(
    api: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    ids = sorted([(await subscribe(api, ALICE))["id"] for _ in range(3)])
    first = (await api.get(f"{LIST}&limit=2", headers=ALICE)).json()
    rest = (await api.get(f"{LIST}&limit=2&cursor={first['next_cursor']}", headers=ALICE)).json()
    legacy = (await api.get(f"{LIST}&limit=2&after={first['next']}", headers=ALICE)).json()
    assert [s["id"] for s in first["items"]] == ids[:2] and first["next"] == ids[1]
    assert (
        [s["id"] for s in rest["items"]] == ids[2:] and rest["next_cursor"] is None and rest["next"] is None
    )
    assert legacy == rest

    log = f"/api/v1/webhooks/{ids[0]}/deliveries"
    made = await add_deliveries(engine, ids[0], 3)
    page = (await api.get(f"{log}?limit=2", headers=ALICE)).json()
    after = (await api.get(f"{log}?limit=2&cursor={page['next_cursor']}", headers=ALICE)).json()
    old = (await api.get(f"{log}?limit=2&before={page['next']}", headers=ALICE)).json()
    assert [d["id"] for d in page["items"] + after["items"]] == made[::-1]
    assert page["next"] == page["items"][-1]["cursor"] and after["next_cursor"] is None
    assert old == after

    runs_cursor = RUNS.encode((datetime(2026, 11, 20, tzinfo=UTC), "some-uid"))
    both = await api.get(f"{LIST}&cursor={first['next_cursor']}&after={ids[0]}", headers=ALICE)
    other_list = await api.get(f"{log}?cursor={first['next_cursor']}", headers=ALICE)
    of_runs = await api.get(f"{LIST}&cursor={runs_cursor}", headers=ALICE)
    assert of_runs.status_code == 400
    assert (
        both.status_code == 400 and both.json()["detail"] == "pass cursor, or the deprecated after, not both"
    )
    assert other_list.status_code == 400, "a cursor of one list is refused by another"
    assert other_list.json()["detail"].startswith("cursor is not valid")


class RecordingGateway:
    """Answers every SubjectAccessReview with yes for ``allowed`` verbs, keeping what was asked."""

    def __init__(self, allowed: set[str]) -> None:
        self.asked: list[dict[str, Any]] = []
        self._allowed = allowed

    def create(self, resource: object, namespace: str | None, body: dict[str, Any]) -> dict[str, Any]:
        attributes = body["spec"]["resourceAttributes"]
        self.asked.append(attributes)
        return {**body, "status": {"allowed": attributes["verb"] in self._allowed}}


async def test_kubernetes_decides_who_may_update_with_a_subject_access_review() -> None:
    gateway = RecordingGateway(allowed={"list"})
    reviewer = KubeAccessReviewer(cast(KubeGateway, gateway))
    alice = Principal("alice", ("team-a",))
    assert await reviewer.can_list(alice, "team-a")
    gateway.asked.clear()
    assert not await reviewer.can_update(alice, "team-a")
    assert gateway.asked == [  # every kind of job, MPIJobs first
        {"verb": "update", "group": r.group, "resource": r.plural, "namespace": "team-a"} for r in LISTED
    ]
    assert gateway.asked[:2] == [
        {"verb": "update", "group": "kubeflow.org", "resource": "mpijobs", "namespace": "team-a"},
        {"verb": "update", "group": "trainer.kubeflow.org", "resource": "trainjobs", "namespace": "team-a"},
    ]


async def test_in_kubernetes_only_who_may_create_jobs_subscribes_so_readers_cannot_fill_the_quota(
    engine: AsyncEngine,
) -> None:
    alice = Principal("alice", ("team-a",))
    reader = RecordingGateway(allowed={"list"})  # the `view` role
    assert not await KubeAccessReviewer(cast(KubeGateway, reader)).can_subscribe(alice, "team-a")
    assert [a["verb"] for a in reader.asked] == ["create"] * len(LISTED)
    editor = RecordingGateway(allowed={"list", "create"})  # the `edit` role
    assert await KubeAccessReviewer(cast(KubeGateway, editor)).can_subscribe(alice, "team-a")

    app = create_app(
        engine,
        PipelineMetrics(),
        KubeAccess(RecordingGateway(allowed={"list"})),
        notify=NotifySettings(allow_cidrs=["127.0.0.0/8"]),
        quotas=replace(DEFAULT_QUOTAS, per_namespace=1),
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as api:
        refused = await api.post("/api/v1/webhooks", json={"url": HOOK, "namespace": "team-a"}, headers=RITA)
    assert refused.status_code == 403, refused.text
    async with engine.connect() as conn:
        assert await subscriptions.quota_usage(conn, "rita", "team-a") == (0, 0)


async def test_cached_answers_to_list_and_update_are_kept_apart() -> None:
    gateway = RecordingGateway(allowed={"list"})
    cached = CachedAccess(KubeAccessReviewer(cast(KubeGateway, gateway)), ttl_s=30)
    alice = Principal("alice")
    answers = [await cached.can_list(alice, "team-a"), await cached.can_update(alice, "team-a")]
    answers += [await cached.can_list(alice, "team-a"), await cached.can_update(alice, "team-a")]
    assert answers == [True, False, True, False]
    assert [a["verb"] for a in gateway.asked] == ["list"] + ["update"] * len(LISTED)


class KubeAccess(KubeAccessReviewer):
    """The Kubernetes reviewer over a recording gateway, every token standing for its name."""

    def __init__(self, gateway: RecordingGateway) -> None:
        super().__init__(cast(KubeGateway, gateway))

    async def review_token(self, token: str) -> Principal | None:
        return Principal(token.removeprefix("t-"), ("system:authenticated",))
