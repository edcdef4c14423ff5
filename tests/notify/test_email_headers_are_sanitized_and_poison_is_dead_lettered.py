"""A root cause carrying CR/LF cannot inject an e-mail header, and an e-mail that can never be
composed is dead-lettered at once instead of blocking the job's later e-mails for ever."""

from __future__ import annotations

from collections.abc import Sequence
from email.message import EmailMessage
from typing import Any

import pytest

from consumers.notify import dispatch as dispatch_module
from consumers.notify.mailing import MAX_SUBJECT, compose, header_value
from controller.contract.notifications import WebhookEvent
from controller.testing.notify import (
    finding,
    job,
    settled_log,
)
from controller.testing.receivers import SmtpSink
from tests.notify_fixtures import Notifying

INJECTION = "Worker 2 failed\r\nBcc: x@evil.example\r\n\r\nforged body"


async def subscribe_by_email(api: Any) -> str:
    created = await api.post(
        "/api/v1/webhooks",
        json={"channel": "email", "recipients": ["oncall@example.com"], "event_types": ["finding.firing"]},
    )
    assert created.status_code == 201, created.text
    subscription: str = created.json()["id"]
    return subscription


async def test_a_root_cause_with_crlf_is_delivered_with_a_clean_subject_and_no_extra_header(
    notifying: Notifying,
) -> None:
    with SmtpSink() as sink:
        async with notifying.mailing(sink) as api:
            subscription = await subscribe_by_email(api)
            running = job("Running", change="ADDED")
            await notifying.publish(running)
            await notifying.publish_findings(finding(running).model_copy(update={"root_cause": INJECTION}))
            (mail,) = await sink.wait_for(1)
            (delivery,) = await settled_log(api, subscription, 1)

    assert delivery["status"] == "delivered"
    assert mail["Subject"] == (
        "[mpijob-controller] [critical] team-a/pi: Worker 2 failed Bcc: x@evil.example forged body"
    )
    assert mail["Bcc"] is None and "x@evil.example" not in str(mail["To"])
    assert sink.recipients == [["oncall@example.com"]]


def test_header_values_are_one_bounded_line() -> None:
    assert header_value("a\r\nb\x00c\u2028d\x85e\tf") == "a b c d e f"
    long = header_value("x" * 1000)
    assert len(long) == MAX_SUBJECT and long.endswith("…")


async def test_an_email_that_cannot_be_composed_is_dead_and_the_next_one_is_delivered(
    notifying: Notifying,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refusing(
        events: Sequence[WebhookEvent], recipients: Sequence[str], sender: str, ids: Sequence[str]
    ) -> EmailMessage:
        if any(e.data.finding and "POISON" in e.data.finding.root_cause for e in events):
            raise ValueError("the mail library refuses this message")
        return compose(events, recipients, sender, ids)

    monkeypatch.setattr(dispatch_module, "compose", refusing)
    with SmtpSink() as sink:
        async with notifying.mailing(sink, digest_window_s=0) as api:
            subscription = await subscribe_by_email(api)
            running = job("Running", change="ADDED")
            await notifying.publish(running)
            poison = finding(running).model_copy(update={"root_cause": "POISON"})
            later = finding(running, "crashloop").model_copy(update={"root_cause": "Launcher crash-loops"})
            await notifying.publish_findings(poison, later)
            (mail,) = await sink.wait_for(1)
            log = await settled_log(api, subscription, 2)

    assert mail["Subject"] == "[mpijob-controller] [critical] team-a/pi: Launcher crash-loops"
    dead, delivered = sorted(log, key=lambda d: d["status"] != "failed")
    assert (dead["status"], delivered["status"]) == ("failed", "delivered")
    assert dead["attempts"] == 1 and "cannot compose the email" in dead["last_error"]
