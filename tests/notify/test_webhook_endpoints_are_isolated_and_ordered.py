"""One job's events reach an endpoint in order, even across retries, while other jobs go on; a slow
or dead endpoint holds only its own slots and never delays deliveries to the others."""

from __future__ import annotations

from controller.testing.notify import job, publish_jobs, subscribe
from controller.testing.ports import free_port
from controller.testing.receivers import Received, Reply
from controller.testing.waits import until
from tests.notify_fixtures import Notifying

RETRIES = [0.4] * 60
"""pi's backoffs: its first event is retried until the other job's arrives (on an idle machine
once; on a loaded one, as long as that takes, up to 24 s)."""


async def test_one_jobs_events_arrive_in_order_across_a_retry_while_other_jobs_pass(
    notifying: Notifying,
) -> None:
    def name(r: Received) -> str:
        return str(r.payload["data"]["job"]["name"])

    def seen(r: Received) -> tuple[str, str, int]:
        return name(r), r.payload["type"], r.status

    async with notifying.serving(retry_schedule_s=RETRIES) as (rx, api):

        def other_arrived() -> bool:
            return any(name(r) == "other" for r in rx.at("ordered"))

        # job pi's first event fails until the other job's event has arrived: an endpoint that
        # held the other job behind pi's retries would never let pi through
        rx.decide(
            "ordered",
            lambda p: Reply(503) if p["data"]["job"]["name"] == "pi" and not other_arrived() else None,
        )
        await subscribe(api, rx, "ordered")
        await notifying.publish(job("Pending", change="ADDED"))
        await rx.wait_for("ordered", 1)
        await publish_jobs(
            notifying.js,
            notifying.topology,
            job("Running"),
            job("Failed"),
            job("Pending", name="other", change="ADDED"),
        )
        await until(
            lambda: ("pi", "job.failed", 200) in {seen(r) for r in rx.at("ordered")},
            len(RETRIES) * 0.5,
            lambda: [seen(r) for r in rx.at("ordered")],
        )
        received = rx.at("ordered")

    pi = [seen(r) for r in received if name(r) == "pi"]
    assert pi[-3:] == [("pi", "job.created", 200), ("pi", "job.running", 200), ("pi", "job.failed", 200)]
    assert pi[:-3] and set(pi[:-3]) == {("pi", "job.created", 503)}, pi  # failed, then in order
    assert [seen(r) for r in received if name(r) == "other"] == [("other", "job.created", 200)]
    other = next(r for r in received if name(r) == "other")
    retried = next(r for r in received if seen(r) == ("pi", "job.created", 200))
    assert received.index(other) < received.index(retried)  # not stuck behind pi's backoff


SLOW_S = 10.0
"""The slow endpoint answers after this, its requests time out after this: a delivery to a fast
endpoint queued behind one of them would arrive no sooner."""


async def test_a_slow_and_a_dead_endpoint_do_not_delay_the_others(notifying: Notifying) -> None:
    fast = [f"fast-{n}" for n in range(5)]
    jobs = [job("Pending", name=f"job-{n}", change="ADDED") for n in range(6)]
    async with notifying.serving(
        request_timeout_s=SLOW_S, endpoint_concurrency=2, max_in_flight=6, retry_schedule_s=[5.0]
    ) as (rx, api):
        rx.script("slow", *(Reply(delay_s=SLOW_S) for _ in jobs))
        await subscribe(api, rx, "slow")
        dead = await api.post("/api/v1/webhooks", json={"url": f"http://127.0.0.1:{free_port()}/gone"})
        assert dead.status_code == 201
        for path in fast:
            await subscribe(api, rx, path)
        await notifying.publish(*jobs)
        for path in fast:  # all 30 while the slow endpoint holds its first requests (SLOW_S each)
            await rx.wait_for(path, len(jobs), timeout_s=SLOW_S / 2)
        slow_started = len(rx.at("slow"))

    assert slow_started <= 2  # the slow endpoint held its 2 slots, never more
