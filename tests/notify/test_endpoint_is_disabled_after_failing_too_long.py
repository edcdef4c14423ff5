"""An endpoint whose every attempt fails for ``notify.disable_after_s`` is disabled, with a log line,
a reason on the subscription and a notice record; its pending deliveries wait (new events are
not queued for it), and re-enabling it sends them. Time is a manual clock: the threshold is an
hour, the test takes a second."""

from __future__ import annotations

import asyncio
import logging

import pytest

from controller.testing.notify import (
    ManualClock,
    attempted,
    job,
    settled_log,
    subscribe,
    with_notify,
)
from controller.testing.receivers import Receiver, Reply
from controller.testing.waits import until
from tests.notify_fixtures import Notifying


async def test_an_endpoint_failing_for_an_hour_is_disabled_with_a_notice_and_can_be_reenabled(
    notifying: Notifying,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with_notify(
        notifying.settings, disable_after_s=3600, retry_schedule_s=[600, 600, 600, 600, 600, 600, 600, 600]
    )
    clock = ManualClock()
    async with (
        Receiver() as rx,
        notifying.api(clock=clock) as api,
        notifying.running(clock=clock),
    ):
        rx.script("broken", *(Reply(500) for _ in range(7)))
        sub = await subscribe(api, rx, "broken")
        url = f"/api/v1/webhooks/{sub['id']}"
        await notifying.publish(job("Pending", change="ADDED"))
        for attempt in range(1, 7):  # every 10 minutes, failing
            await rx.wait_for("broken", attempt)
            await attempted(api, sub["id"], attempt)
            view = (await api.get(url)).json()
            assert view["state"] == "active" and view["failing_since"] is not None
            clock.advance(seconds=601)
        await rx.wait_for("broken", 7)  # 60+ minutes of failures

        async def disabled() -> bool:
            state: str = (await api.get(url)).json()["state"]
            return state == "disabled"

        await until(disabled)
        view = (await api.get(url)).json()
        await notifying.publish(job("Running"))
        await asyncio.sleep(0.3)
        assert len(rx.at("broken")) == 7  # nothing is sent to (or queued for) a disabled endpoint

        enabled = await api.patch(url, json={"state": "active"})  # its pending delivery goes out at once
        log = await settled_log(api, sub["id"], 1)
        healthy = (await api.get(url)).json()

    assert "every attempt failed since" in view["disabled_reason"] and "HTTP 500" in view["disabled_reason"]
    assert [n["kind"] for n in view["notices"]] == ["disabled"]
    assert view["notices"][0]["message"] == view["disabled_reason"]
    assert any(
        r.levelno == logging.WARNING
        and sub["id"] in r.getMessage()
        and "disabled automatically" in r.getMessage()
        for r in caplog.records
    )
    assert notifying.metrics.registry.get_sample_value("mpijc_notify_endpoints_disabled_total") == 1
    assert enabled.status_code == 200 and enabled.json()["disabled_reason"] is None
    assert [(d["event_type"], d["status"], d["attempts"]) for d in log] == [("job.created", "delivered", 8)]
    assert healthy["state"] == "active" and healthy["failing_since"] is None
