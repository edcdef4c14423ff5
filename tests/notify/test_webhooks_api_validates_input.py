"""The subscriptions API: CRUD with secrets shown once, every bad parameter a 4xx that says what
is wrong (never a 5xx), namespace authorization through the auth seam, and cursors."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import StaticAccess
from controller.contract.settings import Settings, SmtpSettings, StaticUser
from controller.metrics import PipelineMetrics
from controller.store.engine import make_engine
from controller.testing.notify import api_client, offline_settings, with_notify

HOOK = "http://127.0.0.1:9/hook"
USERS = {
    "t-admin": StaticUser(username="admin", namespaces=["*"], manage=["*"]),
    "t-alice": StaticUser(username="alice", namespaces=["team-a"], manage=["team-a"]),
}


def as_(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"url": HOOK, "event_types": ["job.exploded"]}, 422, "unknown event types ['job.exploded']"),
        ({"url": HOOK, "rules": ["oops"]}, 422, "unknown rules ['oops']"),
        ({"url": HOOK, "severities": ["fatal"]}, 422, "unknown severities ['fatal']"),
        ({"url": HOOK, "label_selector": "team in a"}, 422, "is not key, !key, key=value"),
        ({"url": HOOK, "namespace": "Team_A"}, 422, "not a valid Kubernetes namespace name"),
        ({"url": HOOK, "job_name": "-pi"}, 422, "not a valid Kubernetes object name"),
        ({}, 422, "a webhook subscription needs a url"),
        ({"url": HOOK, "recipients": ["a@example.com"]}, 422, "recipients belong to channel email"),
        ({"channel": "email", "recipients": []}, 422, "needs 1 to 50 recipients"),
        (
            {"channel": "email", "recipients": ["not-an-address"]},
            422,
            "not email addresses: ['not-an-address']",
        ),
        (
            {"channel": "email", "recipients": ["a@example.com"], "url": HOOK},
            422,
            "has recipients, not a url",
        ),
        ({"url": HOOK, "expires_at": "2020-01-01T00:00:00Z"}, 422, "expires_at must be a future time"),
        ({"url": HOOK, "expires_at": "2999-01-01T00:00:00"}, 422, "with a timezone"),
        ({"url": "http://[::1/x"}, 422, "not a valid URL"),
        ({"url": HOOK, "colour": "blue"}, 422, "Extra inputs are not permitted"),
        ({"url": HOOK, "channel": "pigeon"}, 422, "'webhook' or 'email'"),
        ({"url": HOOK, "description": "a\u0000b"}, 422, "description may not contain NUL characters"),
        ({"url": HOOK, "label_selector": "x" * 1025}, 422, "at most 1024 characters"),
    ],
    ids=[
        "event-type",
        "rule",
        "severity",
        "selector",
        "namespace",
        "job-name",
        "no-url",
        "webhook-with-recipients",
        "no-recipients",
        "bad-address",
        "email-with-url",
        "expired",
        "naive-time",
        "bad-url",
        "unknown-field",
        "unknown-channel",
        "nul",
        "long-selector",
    ],
)
async def test_a_bad_subscription_is_a_4xx_that_names_the_problem(
    body: dict[str, Any], status: int, reason: str, metrics: PipelineMetrics
) -> None:
    """Validation answers before the database is touched (the engine here goes nowhere)."""
    settings = offline_settings(smtp=SmtpSettings(host="127.0.0.1"))
    nowhere = make_engine("postgresql://nobody@127.0.0.1:1/none")
    async with api_client(settings, nowhere, metrics) as api:
        response = await api.post("/api/v1/webhooks", json=body)
    await nowhere.dispose()
    assert response.status_code == status
    assert reason in str(response.json()["detail"])


async def test_a_subscription_is_created_read_changed_rotated_and_deleted(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings)
    async with api_client(settings, engine, metrics) as api:
        created = await api.post(
            "/api/v1/webhooks",
            json={"url": HOOK, "namespace": "team-a", "rules": ["oom", "oom"], "description": "CI"},
        )
        sub = created.json()
        url = f"/api/v1/webhooks/{sub['id']}"
        read = (await api.get(url)).json()
        listed = (await api.get("/api/v1/webhooks")).json()["items"]
        changed = await api.patch(url, json={"label_selector": "team=nlp", "event_types": ["job.failed"]})
        refused = await api.patch(url, json={"label_selector": "team in x"})
        paused = await api.patch(url, json={"state": "disabled"})
        rotated = await api.post(f"{url}/rotate-secret")
        deliveries = await api.get(f"{url}/deliveries")
        deleted = await api.delete(url)
        gone = await api.get(url)
        email_off = await api.post(
            "/api/v1/webhooks", json={"channel": "email", "recipients": ["a@example.com"]}
        )

    assert created.status_code == 201 and sub["secret"].startswith("whsec_")
    assert sub["event_types"] == ["finding.*"] and sub["rules"] == ["oom"] and sub["state"] == "active"
    assert "secret" not in read and read["notices"] == [] and read["created_by"] == "anonymous"
    assert [s["id"] for s in listed] == [sub["id"]] and "secret" not in listed[0]
    assert changed.status_code == 200
    assert (changed.json()["label_selector"], changed.json()["event_types"]) == ("team=nlp", ["job.failed"])
    assert refused.status_code == 422 and "is not key, !key, key=value" in refused.json()["detail"]
    assert (
        paused.json()["state"] == "disabled" and paused.json()["disabled_reason"] == "disabled by anonymous"
    )
    assert rotated.status_code == 200 and rotated.json()["secret"] not in (sub["secret"], None)
    assert deliveries.json() == {"items": [], "next_cursor": None, "next": None}
    assert (deleted.status_code, gone.status_code) == (204, 404)
    assert email_off.status_code == 422 and "not configured" in email_off.json()["detail"]


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/api/v1/webhooks?limit=0", "greater than or equal to 1"),
        ("/api/v1/webhooks?limit=501", "less than or equal to 500"),
        ("/api/v1/webhooks?channel=fax", "'webhook' or 'email'"),
        ("/api/v1/webhooks?state=asleep", "'active', 'disabled', 'suspended' or 'expired'"),
        ("/api/v1/webhooks/sub_x/deliveries?status=lost", "'pending', 'delivered' or 'failed'"),
        ("/api/v1/webhooks/sub_x/deliveries?before=abc", "valid integer"),
        ("/api/v1/webhooks/sub_x/deliveries?before=99999999999999999999", "less than or equal to"),
        ("/api/v1/webhooks?namespace=Team%00A", "not a valid Kubernetes namespace name"),
        ("/api/v1/webhooks?after=zzz", "is not a subscription id"),
    ],
    ids=[
        "limit-low",
        "limit-high",
        "channel",
        "state",
        "delivery-status",
        "cursor",
        "huge-cursor",
        "namespace",
        "after",
    ],
)
async def test_bad_query_parameters_are_422(path: str, reason: str, metrics: PipelineMetrics) -> None:
    settings = offline_settings()
    nowhere = make_engine("postgresql://nobody@127.0.0.1:1/none")
    async with api_client(settings, nowhere, metrics) as api:
        response = await api.get(path)
    await nowhere.dispose()
    assert response.status_code == 422 and reason in str(response.json()["detail"])


async def test_unknown_ids_are_404(settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics) -> None:
    with_notify(settings)
    async with api_client(settings, engine, metrics) as api:
        answers = [
            await api.get("/api/v1/webhooks/sub_missing"),
            await api.patch("/api/v1/webhooks/sub_missing", json={}),
            await api.delete("/api/v1/webhooks/sub_missing"),
            await api.post("/api/v1/webhooks/sub_missing/rotate-secret"),
            await api.get("/api/v1/webhooks/sub_missing/deliveries"),
            await api.post("/api/v1/deliveries/msg_missing/redeliver"),
        ]
    assert [a.status_code for a in answers] == [404] * 6
    assert answers[0].json()["detail"] == "no subscription with id 'sub_missing'"


async def test_a_user_sees_and_manages_only_the_namespaces_they_may_read(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings)
    async with api_client(settings, engine, metrics, reviewer=StaticAccess(USERS)) as api:
        admin_b = await api.post(
            "/api/v1/webhooks", json={"url": HOOK, "namespace": "team-b"}, headers=as_("t-admin")
        )
        admin_all = await api.post("/api/v1/webhooks", json={"url": HOOK}, headers=as_("t-admin"))
        alice_a = await api.post(
            "/api/v1/webhooks", json={"url": HOOK, "namespace": "team-a"}, headers=as_("t-alice")
        )
        alice_b = await api.post(
            "/api/v1/webhooks", json={"url": HOOK, "namespace": "team-b"}, headers=as_("t-alice")
        )
        alice_all = await api.post("/api/v1/webhooks", json={"url": HOOK}, headers=as_("t-alice"))
        alice_reads_b = await api.get(f"/api/v1/webhooks/{admin_b.json()['id']}", headers=as_("t-alice"))
        alice_moves_a = await api.patch(
            f"/api/v1/webhooks/{alice_a.json()['id']}", json={"namespace": "team-b"}, headers=as_("t-alice")
        )
        alice_list = await api.get("/api/v1/webhooks?namespace=team-a", headers=as_("t-alice"))
        admin_page = await api.get("/api/v1/webhooks?limit=2", headers=as_("t-admin"))
        admin_rest = await api.get(
            f"/api/v1/webhooks?limit=2&after={admin_page.json()['next']}", headers=as_("t-admin")
        )
        anonymous = await api.get("/api/v1/webhooks")

    assert (admin_b.status_code, admin_all.status_code, alice_a.status_code) == (201, 201, 201)
    assert alice_b.status_code == 403 and "namespace 'team-b'" in alice_b.json()["detail"]
    assert alice_all.status_code == 403 and "needs read access to all of them" in alice_all.json()["detail"]
    assert (alice_reads_b.status_code, alice_moves_a.status_code) == (404, 403)
    assert alice_reads_b.json()["detail"] == f"no subscription with id {admin_b.json()['id']!r}"
    assert [s["id"] for s in alice_list.json()["items"]] == [alice_a.json()["id"]]
    assert len(admin_page.json()["items"]) == 2 and len(admin_rest.json()["items"]) == 1
    assert anonymous.status_code == 401
