"""A pipeline asks "tell me when job X finishes": the first matching event is delivered, and the
subscription expires so the next run of X (or anything else) sends nothing more."""

from __future__ import annotations

import asyncio

from controller.contract.events import JobRef
from controller.testing import events as eb
from controller.testing.notify import (
    job,
    settled_log,
    subscribe,
)
from tests.notify_fixtures import Notifying


async def test_a_one_shot_subscription_fires_once_then_expires(notifying: Notifying) -> None:
    rerun = JobRef(uid="uid-team-a-pi-attempt-2", kind="MPIJob", namespace="team-a", name="pi")
    async with notifying.serving() as (rx, api):
        sub = await subscribe(
            api, rx, "pipeline", job_name="pi", event_types=["job.succeeded", "job.failed"], one_shot=True
        )
        await notifying.publish(job("Pending", change="ADDED"), job("Running"))
        await notifying.publish(job("Failed"))
        (finished,) = await rx.wait_for("pipeline", 1)
        await notifying.publish(
            eb.job("Pending", job=rerun, change="ADDED"),
            eb.job("Succeeded", job=rerun),
        )
        await asyncio.sleep(0.5)  # the rerun's events have had time to go through
        (log_entry,) = await settled_log(api, sub["id"], 1)
        view = (await api.get(f"/api/v1/webhooks/{sub['id']}")).json()

    assert finished.payload["type"] == "job.failed" and finished.verified
    assert len(rx.at("pipeline")) == 1
    assert log_entry["status"] == "delivered"
    assert view["state"] == "expired" and view["one_shot"] and view["fired_at"] is not None
