"""A subscription with ``format: cloudevents`` (binary mode) or ``cloudevents-structured`` gets
CloudEvents 1.0 over HTTP that the CloudEvents SDK for Python parses, still signed as Standard
Webhooks; a bad format is a 422 and email has none."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from cloudevents.core.bindings import http
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.contract.cloudevents import encode
from controller.contract.notifications import EventData, JobInfo, Links, WebhookEvent
from controller.contract.settings import Settings
from controller.metrics import PipelineMetrics
from controller.testing.notify import (
    api_client,
    finding,
    job,
    publish_findings,
    subscribe,
    with_notify,
)
from controller.testing.receivers import Receiver
from tests.notify_fixtures import Notifying


def parsed(headers: dict[str, str], body: bytes) -> Any:
    """The event as the CloudEvents SDK reads it from an HTTP request."""
    return http.from_http_event(http.HTTPMessage(headers=headers, body=body))


async def test_binary_and_structured_cloudevents_parse_with_the_sdk_and_verify(notifying: Notifying) -> None:
    failed = job("Failed")
    async with notifying.serving(public_url="https://mpijc.example.com", cluster="gpu-east") as (rx, api):
        binary = await subscribe(api, rx, "binary", format="cloudevents", event_types=["finding.*"])
        structured = await subscribe(
            api, rx, "structured", format="cloudevents-structured", event_types=["finding.*"]
        )
        standard = await subscribe(api, rx, "standard", event_types=["finding.*"])
        assert (binary["format"], structured["format"], standard["format"]) == (
            "cloudevents",
            "cloudevents-structured",
            "standard",
        )
        await notifying.publish(failed)
        await publish_findings(notifying.js, notifying.topology, finding(failed))
        (b,) = await rx.wait_for("binary", 1)
        (s,) = await rx.wait_for("structured", 1)
        (plain,) = await rx.wait_for("standard", 1)

    assert b.verified and s.verified and plain.verified, (b.error, s.error, plain.error)
    assert b.headers["content-type"] == "application/json"
    assert s.headers["content-type"] == "application/cloudevents+json"
    for request in (b, s):
        event = parsed(request.headers, request.body)
        assert event.get_specversion() == "1.0"
        assert event.get_id() == request.webhook_id
        assert event.get_type() == "io.mpijob-controller.finding.firing"
        assert event.get_source() == "/clusters/gpu-east/namespaces/team-a/jobs/pi"
        assert event.get_subject() == failed.uid
        assert event.get_time() == datetime.fromisoformat(plain.payload["timestamp"])
        data = event.get_data()
        assert {k: v for k, v in data.items() if k != "subscription_id"} == {
            k: v for k, v in plain.payload["data"].items() if k != "subscription_id"
        }
        assert data["finding"]["rule"] == "oom"


def test_a_stored_event_encodes_the_same_on_every_retry() -> None:
    """Signatures cover the exact body, so a retry must send the same bytes with the same id."""
    failed = job("Failed")
    body = WebhookEvent(
        type="job.failed",
        timestamp=failed.observed_at,
        data=EventData(
            subscription_id="sub_1",
            job=JobInfo(uid=failed.uid, kind="MPIJob", namespace="team-a", name="pi"),
            links=Links(run="/api/v1/runs/x", timeline="/api/v1/runs/x/timeline", docs=None),
        ),
    ).model_dump_json()
    for fmt in ("cloudevents", "cloudevents-structured"):
        assert encode(body, "msg_1", fmt, "c1") == encode(body, "msg_1", fmt, "c1")
        sent, headers = encode(body, "msg_1", fmt, "c1")
        assert parsed(headers, sent).get_type() == "io.mpijob-controller.job.failed"
    with pytest.raises(ValueError, match="unknown webhook format"):
        encode(body, "msg_1", "xml", "c1")


async def test_a_bad_format_is_refused_and_email_has_none(
    settings: Settings, engine: AsyncEngine, metrics: PipelineMetrics
) -> None:
    with_notify(settings, smtp={"host": "127.0.0.1", "security": "none"})
    async with Receiver() as rx, api_client(settings, engine, metrics) as api:
        bad = await api.post("/api/v1/webhooks", json={"url": rx.url("x"), "format": "xml"})
        email = await api.post(
            "/api/v1/webhooks",
            json={"channel": "email", "recipients": ["a@example.com"], "format": "cloudevents"},
        )
        sub = await subscribe(api, rx, "x")
        changed = await api.patch(f"/api/v1/webhooks/{sub['id']}", json={"format": "cloudevents"})
    assert bad.status_code == 422 and "format" in bad.text
    assert email.status_code == 422 and "format applies to webhooks" in email.text
    assert changed.status_code == 200 and changed.json()["format"] == "cloudevents"
