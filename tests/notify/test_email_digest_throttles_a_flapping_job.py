"""Email over real SMTP (aiosmtpd on loopback): a finding's root cause, remediation and links in
text and HTML, and a flapping job grouped into one digest per window instead of a storm."""

from __future__ import annotations

import asyncio

from controller.contract.events import JobRef
from controller.testing import events as eb
from controller.testing.notify import (
    ManualClock,
    finding,
    job,
    log_of,
    settled_log,
)
from controller.testing.receivers import SmtpSink
from controller.testing.waits import until
from tests.notify_fixtures import Notifying


def body(message: object, subtype: str) -> str:
    part = message.get_body(preferencelist=(subtype,))  # type: ignore[attr-defined]
    content: str = part.get_content()
    return content.replace("\r\n", "\n")


async def test_a_finding_mails_its_root_cause_and_a_flapping_job_sends_one_digest(
    notifying: Notifying,
) -> None:
    clock = ManualClock()
    with SmtpSink() as sink:
        async with notifying.mailing(
            sink, clock, digest_window_s=600, public_url="https://mpijc.example.com"
        ) as api:
            created = await api.post(
                "/api/v1/webhooks",
                json={
                    "channel": "email",
                    "recipients": ["oncall@example.com", "ml-team@example.com"],
                    "namespace": "team-a",
                    "event_types": ["job.failed", "finding.firing"],
                },
            )
            assert created.status_code == 201 and created.json()["secret"] is None
            running = job("Running", change="ADDED")
            await notifying.publish(running)
            await notifying.publish_findings(finding(running))
            (first,) = await sink.wait_for(1)

            flaps = [
                JobRef(uid=f"uid-flap-{n}", kind="MPIJob", namespace="team-a", name="pi") for n in range(3)
            ]
            await notifying.publish(job("Failed"))
            for ref in flaps:  # the job is recreated and fails again, three times
                await notifying.publish(
                    eb.job("Pending", job=ref, change="ADDED"),
                    eb.job("Failed", job=ref),
                )
            await asyncio.sleep(0.5)
            assert len(sink.messages) == 1  # inside the window: held back

            async def first_settled() -> bool:
                log = await log_of(api, created.json()["id"])
                return any(d["status"] == "delivered" for d in log)

            await until(first_settled)  # before time jumps past its lease

            clock.advance(seconds=601)
            first_and_digest = await sink.wait_for(2)
            log = await settled_log(api, created.json()["id"], 5)

    assert first["Subject"] == (
        "[mpijob-controller] [critical] team-a/pi: Worker 2 failed: out of memory (limit 16Gi)"
    )
    assert sink.recipients[0] == ["oncall@example.com", "ml-team@example.com"]
    text, html = body(first, "plain"), body(first, "html")
    assert "Root cause: Worker 2 failed: out of memory (limit 16Gi)" in text
    assert "  1. Increase the worker memory limit\n  2. Reduce the per-rank batch size" in text
    assert f"Run:      https://mpijc.example.com/api/v1/runs/{running.uid}" in text
    assert "Guide:    docs/troubleshooting.md#oom" in text
    assert "<ol><li>Increase the worker memory limit</li>" in html
    assert f'<a href="https://mpijc.example.com/api/v1/runs/{running.uid}">Run</a>' in html

    digest = first_and_digest[1]
    assert digest["Subject"] == "[mpijob-controller] 4 updates about team-a/pi"
    assert body(digest, "plain").count("MPIJob team-a/pi failed") == 4
    assert len(digest["X-MPIJC-Delivery-Ids"].split()) == 4
    assert [d["status"] for d in log] == ["delivered"] * 5
