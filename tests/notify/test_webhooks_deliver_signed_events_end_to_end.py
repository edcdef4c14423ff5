"""Bus events in (JobObserved on ``jobs.>``, Findings on ``findings.>``) → real NATS → notify consumer →
PostgreSQL outbox → dispatcher → a real HTTP request that verifies as a Standard Webhook."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError as LibraryRefused

from consumers.notify import Notifier, NotifyMetrics
from consumers.notify.dispatch import Dispatcher
from controller.contract.signing import WebhookVerificationError, generate_secret, signed_headers, verify
from controller.store import outbox
from controller.testing.notify import (
    ManualClock,
    finding,
    job,
    publish_findings,
    settled_log,
    subscribe,
    with_notify,
)
from controller.testing.receivers import Receiver
from tests.notify_fixtures import Notifying


async def test_a_failed_job_reaches_its_subscriber_signed_and_logged(notifying: Notifying) -> None:
    async with notifying.serving(public_url="https://mpijc.example.com") as (rx, api):
        sub = await subscribe(api, rx, "hooks/ci", namespace="team-a", event_types=["job.failed"])
        running, failed = job("Running", change="ADDED"), job("Failed")
        await notifying.publish(running, failed)
        (request,) = await rx.wait_for("hooks/ci", 1)
        log = await settled_log(api, sub["id"], 1)

    assert request.verified, request.error
    # the Standard Webhooks library, as a receiver would use it, agrees
    assert Webhook(sub["secret"]).verify(request.body, dict(request.headers)) == request.payload
    assert request.headers["content-type"] == "application/json"
    assert request.webhook_id.startswith("msg_") and "." not in request.webhook_id
    assert abs(int(request.headers["webhook-timestamp"]) - time.time()) < 30
    assert request.payload == {
        "type": "job.failed",
        "timestamp": failed.observed_at.isoformat().replace("+00:00", "Z"),
        "data": {
            "schema_version": 1,
            "subscription_id": sub["id"],
            "job": {
                "uid": failed.uid,
                "kind": "MPIJob",
                "namespace": "team-a",
                "name": "pi",
                "phase": "Failed",
                "labels": failed.labels,
                "created_at": failed.created_at.isoformat().replace("+00:00", "Z"),
                "started_at": None,
                "finished_at": None,
            },
            "finding": None,
            "links": {
                "run": f"https://mpijc.example.com/api/v1/runs/{failed.uid}",
                "timeline": f"https://mpijc.example.com/api/v1/runs/{failed.uid}/timeline",
                "docs": None,
            },
        },
    }
    (entry,) = log
    assert (entry["id"], entry["status"], entry["attempts"], entry["event_type"]) == (
        request.webhook_id,
        "delivered",
        1,
        "job.failed",
    )
    (attempt,) = entry["attempt_log"]
    assert (attempt["outcome"], attempt["status_code"]) == ("delivered", 200) and attempt["latency_ms"] > 0
    delivered = notifying.metrics.registry.get_sample_value(
        "mpijc_notify_deliveries_total", {"channel": "webhook", "outcome": "delivered"}
    )
    assert delivered == 1
    assert (
        notifying.metrics.registry.get_sample_value(
            "mpijc_notify_attempt_seconds_count", {"channel": "webhook"}
        )
        == 1
    )


async def test_filters_pick_events_by_namespace_name_labels_types_and_rules(notifying: Notifying) -> None:
    labels = {"team": "nlp", "tier": "prod"}
    story = [
        job("Pending", change="ADDED", labels=labels),
        job("Running", labels=labels),
        job("Failed", labels=labels),
    ]
    oom = finding(story[-1])
    expected = {
        "all": ["job.created", "job.running", "job.failed", "finding.firing", "finding.resolved"],
        "labels": ["job.created", "job.running", "job.failed", "finding.firing", "finding.resolved"],
        "oom": ["finding.firing", "finding.resolved"],
        "finished": ["job.failed"],
        "other-job": [],
        "dev-only": [],
        "warnings": [],
        "team-b": [],
    }
    async with notifying.serving() as (rx, api):
        subs = {
            "all": await subscribe(api, rx, "all"),
            "labels": await subscribe(api, rx, "labels", label_selector="team=nlp,tier!=dev,!legacy"),
            "oom": await subscribe(api, rx, "oom", namespace="team-a", rules=["oom"]),
            "finished": await subscribe(
                api, rx, "finished", job_name="pi", event_types=["job.succeeded", "job.failed"]
            ),
            "other-job": await subscribe(api, rx, "other-job", job_name="other"),
            "dev-only": await subscribe(api, rx, "dev-only", label_selector="tier=dev"),
            "warnings": await subscribe(api, rx, "warnings", severities=["warning"]),
            "team-b": await subscribe(api, rx, "team-b", namespace="team-b"),
        }
        await notifying.publish(*story)
        await rx.wait_for("all", 3)  # the rules consumer finds nothing before it has seen the job
        await publish_findings(
            notifying.js, notifying.topology, oom, finding(story[-1], status="resolved", revision=2)
        )
        for path, types in expected.items():
            if types:
                await rx.wait_for(path, len(types))
        settled = {path: await settled_log(api, sub["id"], len(expected[path])) for path, sub in subs.items()}

    for path, types in expected.items():
        assert [r.payload["type"] for r in rx.at(path)] == types, path
        assert all(r.verified for r in rx.at(path)), path
        assert [d["status"] for d in settled[path]] == ["delivered"] * len(types), path
    firing = rx.at("oom")[0].payload["data"]
    assert firing["finding"]["root_cause"] == "Worker 2 failed: out of memory (limit 16Gi)"
    assert firing["finding"]["remediation"] == [
        "Increase the worker memory limit",
        "Reduce the per-rank batch size",
    ]
    assert firing["job"]["labels"] == labels and firing["links"]["docs"] == "docs/troubleshooting.md#oom"
    created = story[-1].created_at.isoformat().replace("+00:00", "Z")
    assert (firing["job"]["phase"], firing["job"]["created_at"]) == ("Failed", created)


async def test_a_rotated_secret_signs_twice_until_the_overlap_ends(notifying: Notifying) -> None:
    with_notify(notifying.settings, rotation_overlap_s=3600)
    clock = ManualClock()
    async with (
        Receiver() as rx,
        notifying.api(clock=clock) as api,
        notifying.running(clock=clock),
    ):
        old = (await subscribe(api, rx, "rotating", event_types=["job.created"]))["secret"]
        sub_id = (await api.get("/api/v1/webhooks")).json()["items"][0]["id"]
        rotated = await api.post(f"/api/v1/webhooks/{sub_id}/rotate-secret")
        new = rotated.json()["secret"]
        await notifying.publish(job("Pending", name="first", change="ADDED"))
        (during,) = await rx.wait_for("rotating", 1)
        await settled_log(api, sub_id, 1)  # before time jumps past the lease
        clock.advance(seconds=3601)
        await notifying.publish(job("Pending", name="second", change="ADDED"))
        after = (await rx.wait_for("rotating", 2))[1]
        listed = (await api.get(f"/api/v1/webhooks/{sub_id}")).json()

    assert rotated.status_code == 200 and new != old and "secret" not in listed
    assert len(during.headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        assert verify(secret, during.body, during.headers)["type"] == "job.created"
    assert len(after.headers["webhook-signature"].split(" ")) == 1
    assert verify(new, after.body, after.headers)["data"]["job"]["name"] == "second"
    try:
        verify(old, after.body, after.headers)
    except WebhookVerificationError as exc:
        assert "no matching v1 signature" in str(exc)
    else:
        raise AssertionError("the old secret still verifies after the overlap")


async def test_a_bus_message_seen_twice_and_a_dispatcher_that_died_mid_send_deliver_once_more_at_most(
    notifying: Notifying,
) -> None:
    with_notify(notifying.settings, lease_s=30)
    clock = ManualClock()
    events = [job("Pending", change="ADDED"), job("Failed")]
    notifier = Notifier(
        notifying.engine, notifying.settings.notify, NotifyMetrics.on(notifying.metrics.registry), clock
    )
    async with Receiver() as rx, notifying.api() as api:
        sub = await subscribe(api, rx, "once")
        assert await notifier.observe_jobs(events) == 2
        assert await notifier.observe_jobs(events) == 0  # JetStream redelivered the batch: nothing new
        async with notifying.engine.begin() as conn:  # a dispatcher claims, then dies before sending
            claimed = await outbox.claim(conn, clock(), clock() + timedelta(seconds=30), 10, 2)
        assert [c.event_type for c in claimed] == ["job.created"]

        stop = asyncio.Event()
        survivor = asyncio.create_task(
            Dispatcher(notifying.engine, notifying.settings.notify, notifying.metrics, clock=clock).run(stop)
        )
        await asyncio.sleep(0.3)
        assert rx.at("once") == []  # leased: not sent twice while the first might still be sending
        clock.advance(seconds=31)
        received = await rx.wait_for("once", 2)
        log = await settled_log(api, sub["id"], 2)
        stop.set()
        await survivor

    assert [r.payload["type"] for r in received] == ["job.created", "job.failed"]
    assert received[0].webhook_id == claimed[0].id
    assert [d["status"] for d in log] == ["delivered", "delivered"]


def test_each_secret_of_a_rotation_verifies_with_the_standard_webhooks_library() -> None:
    """Signed with the new and the old secret during an overlap: the library accepts either, and
    refuses a secret that signed nothing and a body changed on the way."""
    old, new, other = generate_secret(), generate_secret(), generate_secret()
    body = b'{"type":"job.created","data":{}}'
    headers = signed_headers([new, old], "msg_2kN7", body)
    for secret in (old, new):
        assert Webhook(secret).verify(body, headers) == {"type": "job.created", "data": {}}
    for secret, sent in ((other, body), (new, body.replace(b"created", b"deleted"))):
        with pytest.raises(LibraryRefused):
            Webhook(secret).verify(sent, headers)
