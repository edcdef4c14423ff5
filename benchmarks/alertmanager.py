"""Alertmanager push rate: stored firing alerts → the pusher → a real Alertmanager.

``--alerts`` firing alerts (default 10,000) are stored as the notify consumer stores them; the
pusher's first full send to a real Alertmanager (Debian's ``prometheus-alertmanager``, all
alerts in one group so its notifications cost nothing) is timed until Alertmanager accepted
them all: alerts/s. In the same run, as a reference, the same batches are POSTed straight from
memory by one client (no database, no pusher) and the ratio is reported; then one alert fired
while Alertmanager holds all the others is timed from the commit that stores it (as the notify
consumer's does) to Alertmanager accepting its POST (``--samples`` times: p50/p99).

    .venv/bin/python -m benchmarks.alertmanager [--alerts 10000] [--samples 50]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from benchmarks.harness import pipeline_services, report
from consumers.notify.alerting import payload
from consumers.notify.alertmanager import PATH, AlertmanagerPusher
from consumers.notify.metrics import AlertmanagerMetrics
from controller.contract.settings import AlertmanagerSettings
from controller.store import alerts
from controller.store.alerts import Alert
from controller.testing.alertmanager import Alertmanager, alertmanager_binary
from controller.testing.receivers import Receiver
from controller.testing.waits import until


def _row(n: int, now: datetime) -> dict[str, Any]:
    labels = {
        "alertname": "TrainingJobOOM",
        "namespace": f"team-{n % 50}",
        "training_job": f"job-{n}",
        "kind": "MPIJob",
        "uid": f"uid-{n}",
        "rule": "oom",
        "severity": "critical",
        "cluster": "bench",
    }
    return {
        "finding_id": f"finding-{n}",
        "labels": labels,
        "annotations": {
            "summary": f"Worker {n % 8} failed: out of memory",
            "run_url": f"/api/v1/runs/uid-{n}",
        },
        "generator_url": f"/api/v1/runs/uid-{n}",
        "starts_at": now,
        "updated_at": now,
    }


async def run(count: int, samples: int) -> dict[str, Any]:
    binary, why = alertmanager_binary()
    if binary is None:
        raise SystemExit(why)
    with tempfile.TemporaryDirectory(prefix="bench-am-") as tmp:
        async with Receiver() as rx, pipeline_services(Path(tmp), consumers=()) as bench:
            am = Alertmanager(binary, Path(tmp) / "am", rx.url("am"), group_by=("cluster",))
            await am.start()
            try:
                now = datetime.now(UTC)
                async with bench.engine.begin() as conn:
                    for start in range(0, count, 1000):
                        await alerts.fire(
                            conn, [_row(n, now) for n in range(start, min(count, start + 1000))]
                        )
                settings = AlertmanagerSettings(urls=[am.url], resend_interval_s=3600.0)
                metrics = AlertmanagerMetrics()

                def sent() -> float:
                    return metrics.sample("mpijc_alertmanager_alerts_sent_total", alertmanager=am.url)

                pusher = AlertmanagerPusher(bench.engine, settings, metrics)
                stop = asyncio.Event()
                began = time.perf_counter()
                task = asyncio.create_task(pusher.run(stop))
                await until(lambda: sent() >= count, timeout_s=600, interval_s=0.01)
                push_s = time.perf_counter() - began

                async with bench.engine.connect() as conn:
                    stored = await alerts.owed(conn, am.url)
                reference_s = await _reference(am.url, stored, settings.max_batch)

                latencies: list[float] = []
                for n in range(count, count + samples):
                    before = sent()
                    began = time.perf_counter()
                    async with bench.engine.begin() as conn:
                        await alerts.fire(conn, [_row(n, datetime.now(UTC))])
                    await until(lambda before=before: sent() > before, timeout_s=30, interval_s=0.001)
                    latencies.append((time.perf_counter() - began) * 1000)
                    await asyncio.sleep(0.05)
                stop.set()
                await task
            finally:
                await am.stop()
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "alerts": count,
        "first_push_s": round(push_s, 3),
        "alerts_per_s": round(count / push_s),
        "reference_alerts_per_s": round(count / reference_s),
        "ratio": round(reference_s / push_s, 2),
        "commit_to_accepted_ms": {
            "samples": samples,
            "p50": round(quantiles[49], 1),
            "p99": round(quantiles[98], 1),
            "max": round(max(latencies), 1),
        },
    }


async def _reference(url: str, stored: list[Alert], batch: int) -> float:
    """Seconds one client takes to POST the same alerts in the same batches from memory."""
    now = datetime.now(UTC)
    bodies = [[payload(a, now, 3600.0) for a in stored[i : i + batch]] for i in range(0, len(stored), batch)]
    async with httpx.AsyncClient(timeout=30) as client:
        began = time.perf_counter()
        for body in bodies:
            (await client.post(url + PATH, json=body)).raise_for_status()
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--alerts", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    report("alertmanager", asyncio.run(run(args.alerts, args.samples)))


if __name__ == "__main__":
    main()
