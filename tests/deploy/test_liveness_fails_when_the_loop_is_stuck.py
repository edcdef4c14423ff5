"""The liveness probe (``/healthz`` on the metrics port) fails when the process's event loop is
stuck, and only then: the metrics thread keeps answering ``/metrics`` meanwhile.

The watchers' and consumers' metrics port (:func:`controller.metrics.serve_metrics`) is driven
with a really blocked loop: the test calls the port synchronously from the loop itself, so the
loop makes no turn until the probe says 503. The API's metrics port reads the heartbeat its loop
stamps, with an injected clock.
"""

from __future__ import annotations

import time

import httpx
from prometheus_client import CollectorRegistry, Counter
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.app import create_app, metrics_app
from controller.metrics import Heartbeat, PipelineMetrics, serve_metrics
from controller.testing.waits import until

STUCK_AFTER_S = 3.0


def block_until_the_probe_fails(base: str) -> tuple[httpx.Response, httpx.Response]:
    """Called on the event loop, this blocks it (synchronous calls, short sleeps, no await) until
    ``/healthz`` answers something else than 200, at most a minute; that answer and a scrape
    taken while the loop is still blocked."""
    with httpx.Client(base_url=base, timeout=10) as client:
        answered = client.get("/healthz")
        for _ in range(1200):
            if answered.status_code != 200:
                break
            time.sleep(0.05)
            answered = client.get("/healthz")
        return answered, client.get("/metrics")


async def test_healthz_goes_503_while_the_loop_is_blocked_and_metrics_still_answer() -> None:
    registry = CollectorRegistry()
    Counter("mpijc_probe_test", "A series to scrape.", registry=registry).inc()
    async with (
        serve_metrics(registry, 0, STUCK_AFTER_S, addr="127.0.0.1") as port,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as client,
    ):
        assert (await client.get("/healthz")).status_code == 200
        stuck, scraped = block_until_the_probe_fails(f"http://127.0.0.1:{port}")
        assert stuck.status_code == 503, stuck.text
        assert stuck.text.startswith("event loop stuck for ")
        assert scraped.status_code == 200 and "mpijc_probe_test_total 1.0" in scraped.text
        # the loop turns again: alive again from its next stamp
        await until(lambda: _alive(client), timeout_s=30)


async def _alive(client: httpx.AsyncClient) -> bool:
    return (await client.get("/healthz")).status_code == 200


async def test_the_api_liveness_probe_fails_once_its_loop_stamped_no_heartbeat(engine: AsyncEngine) -> None:
    now = [1000.0]
    heartbeat = Heartbeat(STUCK_AFTER_S, clock=lambda: now[0])
    app = metrics_app(create_app(engine, PipelineMetrics()), None, heartbeat)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://metrics") as client:
        assert (await client.get("/healthz")).status_code == 200
        now[0] += STUCK_AFTER_S - 0.5  # busy, not stuck
        assert (await client.get("/healthz")).status_code == 200
        now[0] += 1.0
        stuck = await client.get("/healthz")
        assert stuck.status_code == 503
        assert stuck.json()["detail"] == "the API's event loop made no turn for 4 s"
        heartbeat.beat()
        assert (await client.get("/healthz")).status_code == 200
