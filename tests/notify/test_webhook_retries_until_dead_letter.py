"""Failed attempts are retried on the schedule (5xx, timeouts, connection errors, 408/429 honouring
Retry-After), 4xx are not, the last failure is a dead letter in the delivery log, and the
redeliver API sends it again under the same ``webhook-id``."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from controller.metrics import PipelineMetrics
from controller.testing.notify import job, log_of, settled_log, subscribe, with_notify
from controller.testing.ports import free_port
from controller.testing.receivers import Receiver, Reply
from controller.testing.waits import until
from tests.notify_fixtures import Notifying


def outcomes(entry: dict[str, object]) -> list[tuple[object, object]]:
    return [(a["outcome"], a["status_code"]) for a in entry["attempt_log"]]  # type: ignore[attr-defined]


def count(metrics: PipelineMetrics, outcome: str) -> float:
    value = metrics.registry.get_sample_value(
        "mpijc_notify_deliveries_total", {"channel": "webhook", "outcome": outcome}
    )
    return value or 0.0


async def test_a_failing_endpoint_is_retried_with_backoff_then_dead_lettered(notifying: Notifying) -> None:
    async with notifying.serving(retry_schedule_s=[0.1, 0.2]) as (rx, api):
        rx.script("flaky", Reply(503), Reply(502), Reply(500))
        sub = await subscribe(api, rx, "flaky", event_types=["job.created"])
        await notifying.publish(job("Pending", change="ADDED"))
        (dead,) = await settled_log(api, sub["id"], 1)
        tries = rx.at("flaky")

    assert [r.status for r in tries] == [503, 502, 500]
    assert len({r.webhook_id for r in tries}) == 1 and tries[0].webhook_id == dead["id"]
    assert all(r.verified for r in tries)  # re-signed with a fresh timestamp each time
    gaps = [b.at - a.at for a, b in itertools.pairwise(tries)]
    assert gaps[0] >= 0.1 and gaps[1] >= 0.2
    assert (dead["status"], dead["attempts"], dead["last_status_code"]) == ("failed", 3, 500)
    assert outcomes(dead) == [("retry", 503), ("retry", 502), ("failed", 500)]
    assert all(a["latency_ms"] > 0 for a in dead["attempt_log"])
    assert (count(notifying.metrics, "retry"), count(notifying.metrics, "failed")) == (2, 1)


async def test_a_refused_connection_is_retried_and_its_error_logged(notifying: Notifying) -> None:
    with_notify(notifying.settings)
    nowhere = f"http://127.0.0.1:{free_port()}/hook"
    async with notifying.api() as api, notifying.running():
        created = await api.post("/api/v1/webhooks", json={"url": nowhere, "event_types": ["job.created"]})
        await notifying.publish(job("Pending", change="ADDED"))
        (dead,) = await settled_log(api, created.json()["id"], 1)

    assert (dead["status"], dead["attempts"], dead["last_status_code"]) == ("failed", 3, None)
    assert outcomes(dead) == [("retry", None), ("retry", None), ("failed", None)]
    assert dead["last_error"].startswith("ClientConnectorError: Cannot connect to host")


@pytest.mark.parametrize("status", [400, 422], ids=lambda s: f"http-{s}")
async def test_a_client_error_is_not_retried(
    status: int,
    notifying: Notifying,
) -> None:
    async with notifying.serving() as (rx, api):
        rx.script("strict", Reply(status, body=b"schema mismatch"))
        sub = await subscribe(api, rx, "strict", event_types=["job.created"])
        await notifying.publish(job("Pending", change="ADDED"))
        (dead,) = await settled_log(api, sub["id"], 1)

    assert len(rx.at("strict")) == 1
    assert (dead["status"], dead["attempts"], dead["last_error"]) == ("failed", 1, "schema mismatch")
    assert outcomes(dead) == [("failed", status)]


@pytest.mark.parametrize("status", [429], ids=lambda s: f"http-{s}")
async def test_retry_after_is_honoured(
    status: int,
    notifying: Notifying,
) -> None:
    async with notifying.serving(retry_schedule_s=[0.05]) as (rx, api):
        rx.script("busy", Reply(status, {"Retry-After": "1"}))
        sub = await subscribe(api, rx, "busy", event_types=["job.created"])
        await notifying.publish(job("Pending", change="ADDED"))
        (entry,) = await settled_log(api, sub["id"], 1)

    first, second = rx.at("busy")
    assert second.at - first.at >= 1.0  # not the 50 ms of the schedule
    assert outcomes(entry) == [("retry", status), ("delivered", 200)]


async def test_a_dead_letter_is_redelivered_under_the_same_id(notifying: Notifying) -> None:
    async with notifying.serving(request_timeout_s=10.0, lease_s=30.0) as (rx, api):
        # the redelivery is answered 3 s late: it is still pending when it is asked for again (a
        # receiver answering at once could settle it between the two requests)
        rx.script("fixed-later", Reply(400), Reply(200, delay_s=3.0))
        sub = await subscribe(api, rx, "fixed-later", event_types=["job.created"])
        await notifying.publish(job("Pending", change="ADDED"))
        (dead,) = await settled_log(api, sub["id"], 1)

        queued = await api.post(f"/api/v1/deliveries/{dead['id']}/redeliver")
        again = await api.post(f"/api/v1/deliveries/{dead['id']}/redeliver")
        (delivered,) = await settled_log(api, sub["id"], 1)
        unknown = await api.post("/api/v1/deliveries/msg_nope/redeliver")

    assert dead["status"] == "failed"
    assert queued.status_code == 202 and queued.json()["status"] == "pending"
    assert again.status_code == 409 and "already pending" in again.json()["detail"]
    assert unknown.status_code == 404
    first, second = rx.at("fixed-later")
    assert first.webhook_id == second.webhook_id == dead["id"] and second.verified
    assert (delivered["status"], delivered["attempts"]) == ("delivered", 1)
    assert outcomes(delivered) == [("failed", 400), ("delivered", 200)]  # the whole log is kept


async def test_410_gone_disables_the_subscription(notifying: Notifying) -> None:
    async with notifying.serving() as (rx, api):
        rx.script("retired", Reply(410))
        sub = await subscribe(api, rx, "retired")
        await notifying.publish(job("Pending", change="ADDED"), job("Running"))

        async def disabled() -> bool:
            state: str = (await api.get(f"/api/v1/webhooks/{sub['id']}")).json()["state"]
            return state == "disabled"

        await until(disabled)
        await asyncio.sleep(0.2)
        view = (await api.get(f"/api/v1/webhooks/{sub['id']}")).json()
        log = await log_of(api, sub["id"])

    assert len(rx.at("retired")) == 1  # job.running waits: the subscription is disabled
    assert [(d["event_type"], d["status"]) for d in log] == [
        ("job.running", "pending"),
        ("job.created", "failed"),
    ]
    assert view["state"] == "disabled" and "410 Gone" in view["disabled_reason"]
    assert [n["kind"] for n in view["notices"]] == ["disabled"]


async def test_a_retry_survives_a_dispatcher_restart(notifying: Notifying) -> None:
    with_notify(notifying.settings, retry_schedule_s=[0.5])
    async with Receiver() as rx, notifying.api() as api:
        rx.script("restart", Reply(503))
        sub = await subscribe(api, rx, "restart", event_types=["job.created"])
        async with notifying.running():
            await notifying.publish(job("Pending", change="ADDED"))
            await rx.wait_for("restart", 1)
        async with notifying.running():  # a new process
            (entry,) = await settled_log(api, sub["id"], 1)

    assert outcomes(entry) == [("retry", 503), ("delivered", 200)]
