"""GPU health from DCGM: detection latency and false positives, on a real Prometheus.

Runs of two workers (one GPU each) are served by the test exporter (dcgm-exporter's series and
labels) to a real Prometheus (Debian's package) scraping every ``--scrape-s``; the usage probe
reads them every ``--refresh-s`` and the rules engine judges every reading, as the watcher and
the rules consumer do (the bus between them is measured by ``benchmarks.usage``).

- **Detection latency**, per fault: from the moment the exporter serves the first faulty value
  (a new Xid 79, a double-bit ECC error, a failed row remapping, NVLink errors; a thermal
  throttle that then lasts) to the finding (``gpu-fault``; ``gpu-throttled`` after
  ``--throttle-s``). The bound it is held against: two scrape intervals, plus the rule's
  window, plus one refresh (the reading's own period; ``usage.refresh_s`` in production).
- **False positives** over near-miss runs judged the whole time: an Xid and counters left from
  before the job, an Xid and ECC errors on a GPU of the same node that no pod holds, throttle
  blips of ``--blip-s`` every ``--blip-every-s``, a hot GPU that is not throttled, and a GPU whose
  ECC and NVLink counters it does not support flicker between DCGM's blank sentinel and ``0``
  every refresh (``9223372036854775794``, ``DCGM_FT_INT64_BLANK + 2``: the value real
  dcgm-exporter output carries for an unsupported field, as its Apache-2.0 README shows; no
  recorded public DCGM time series with a licence to keep was found, so the curves are
  synthetic, this value aside).

``--rounds`` rounds, each with fresh runs, the faults injected at a random phase of the refresh.

    .venv/bin/python -m benchmarks.gpuhealth [--rounds 5] [--scrape-s 1] [--refresh-s 2]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from benchmarks.harness import report, scraped_exporter
from consumers.rules import RuleEngine, RuleThresholds
from controller.contract.events import BusEvent
from controller.contract.settings import UsageSettings
from controller.kube.resources import MPI_PODS
from controller.prometheus import PrometheusReader
from controller.testing.objects import mpijob, pod, with_conditions
from controller.testing.prometheus import GpuSeries, Prometheus, UsageExporter
from watchers.correlating import Correlator, Observation
from watchers.metrics import UsageMetrics
from watchers.usage import UsageProbe
from watchers.watching import WatchChange

HOT = 0x40
BLANK = 9223372036854775794
"""DCGM's "not supported" value of an int64 field, as real dcgm-exporter output carries it."""
HEALTHY = GpuSeries(util=90, fb_used_mib=40_000)
FAULTS: dict[str, tuple[str, GpuSeries]] = {
    "xid-79": ("gpu-fault", replace(HEALTHY, xid=79)),
    "ecc-dbe": ("gpu-fault", replace(HEALTHY, ecc_dbe=1)),
    "row-remap-failure": ("gpu-fault", replace(HEALTHY, remap_failure=1)),
    "nvlink-errors": ("gpu-fault", replace(HEALTHY, nvlink_crc_errors=4)),
    "thermal-throttle": ("gpu-throttled", replace(HEALTHY, throttle_reasons=HOT, temperature_c=90)),
}
NEAR_MISSES = (
    "old-xid-and-counters",
    "unassigned-gpu-fault",
    "throttle-blips",
    "hot-not-throttled",
    "blank-counters",
)


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(
    name: str, node: str, correlator: Correlator, probe: UsageProbe, exporter: UsageExporter, gpu: GpuSeries
) -> tuple[str, list[BusEvent]]:
    """A running two-worker MPIJob on ``node`` told to the probe, worker 1's GPU served as ``gpu``
    and worker 0's healthy; its uid and the bus events the watcher made of it."""
    started = datetime.now(UTC) - timedelta(seconds=30)
    job = with_conditions(mpijob(name, "bench", 2, gpus=1), ("Running", "MPIJobRunning", _iso(started)))
    events = correlator.observe(Observation("job", "ADDED", job, started))
    for index in (0, 1):
        obj = pod(job, "worker", index, phase="Running", node=node)
        obj["status"]["startTime"] = _iso(started)
        events += correlator.observe(Observation("pod", "ADDED", obj, started))
        probe.track(WatchChange(MPI_PODS, "ADDED", obj))
        exporter.gpu("bench", obj["metadata"]["name"], "0", replace(gpu if index else HEALTHY, hostname=node))
    return str(job["metadata"]["uid"]), events


async def _round(
    number: int, prometheus: Prometheus, exporter: UsageExporter, args: argparse.Namespace
) -> dict[str, Any]:
    settings = UsageSettings(
        url=prometheus.url, step_s=args.scrape_s, scrape_interval_s=args.scrape_s, window_s=120, timeout_s=30
    )
    metrics = UsageMetrics(CollectorRegistry())
    correlator = Correlator(pending_ttl_s=600, clock=time.monotonic)
    probe = UsageProbe(settings, correlator, metrics, PrometheusReader(settings))
    engine = RuleEngine(RuleThresholds(gpu_throttle_s=args.throttle_s))
    runs: dict[str, str] = {}
    events: list[BusEvent] = []
    for kind in (*FAULTS, *NEAR_MISSES):
        start = replace(HEALTHY, xid=79, ecc_dbe=5, remapped_rows=2, nvlink_crc_errors=100)
        served = start if kind == "old-xid-and-counters" else HEALTHY
        served = replace(served, temperature_c=92) if kind == "hot-not-throttled" else served
        uid, made = _run(f"r{number}-{kind}", f"node-{number}-{kind}", correlator, probe, exporter, served)
        runs[uid] = kind
        events += made
    exporter.unassigned_gpu("7", replace(HEALTHY, hostname=f"node-{number}-unassigned-gpu-fault"))
    for event in events:
        engine.observe(event, datetime.now(UTC))
    await prometheus.scraped(
        f'count(DCGM_FI_DEV_XID_ERRORS{{exported_pod=~"r{number}-.*"}}) > 0', timeout_s=60
    )
    await asyncio.sleep(args.fill_s + random.uniform(0, args.refresh_s))

    injected = time.monotonic()
    for kind, (_, series) in FAULTS.items():
        exporter.gpu(
            "bench", f"r{number}-{kind}-worker-1", "0", replace(series, hostname=f"node-{number}-{kind}")
        )
    fault = replace(HEALTHY, xid=79, ecc_dbe=3, hostname=f"node-{number}-unassigned-gpu-fault")
    exporter.unassigned_gpu("7", fault)
    detected: dict[str, float] = {}
    false_positives: dict[str, list[str]] = {kind: [] for kind in NEAR_MISSES}
    readings = 0
    try:
        while time.monotonic() - injected < args.observe_s:
            blip = (time.monotonic() - injected) % args.blip_every_s < args.blip_s
            blips = replace(
                HEALTHY, throttle_reasons=HOT if blip else 0, hostname=f"node-{number}-throttle-blips"
            )
            exporter.gpu("bench", f"r{number}-throttle-blips-worker-1", "0", blips)
            flicker = int((time.monotonic() - injected) / args.refresh_s) % 2 * BLANK  # blank, then 0
            blanks = replace(
                HEALTHY, ecc_dbe=flicker, nvlink_crc_errors=flicker, hostname=f"node-{number}-blank-counters"
            )
            exporter.gpu("bench", f"r{number}-blank-counters-worker-1", "0", blanks)
            for reading in await probe.read():
                readings += 1
                for finding in engine.observe(reading, datetime.now(UTC)):
                    kind = runs[finding.job.uid]
                    if kind in NEAR_MISSES and finding.status != "resolved":
                        false_positives[kind].append(finding.rule)
                    elif kind in FAULTS and finding.rule == FAULTS[kind][0] and kind not in detected:
                        detected[kind] = round(time.monotonic() - injected, 2)
            await asyncio.sleep(args.refresh_s)
    finally:
        await probe.aclose()
    return {"detected_after_s": detected, "false_positives": false_positives, "readings": readings}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with scraped_exporter(Path(tmp), args.scrape_s) as (exporter, prometheus):
            for number in range(args.rounds):
                rounds.append(await _round(number, prometheus, exporter, args))
    latency: dict[str, Any] = {}
    for kind, (rule, _) in FAULTS.items():
        seen = [r["detected_after_s"][kind] for r in rounds if kind in r["detected_after_s"]]
        window = args.throttle_s if rule == "gpu-throttled" else 0.0
        latency[kind] = {
            "rule": rule,
            "detected": f"{len(seen)}/{len(rounds)}",
            "median_s": round(statistics.median(seen), 2) if seen else None,
            "max_s": max(seen, default=None),
            "bound_s": 2 * args.scrape_s + window + args.refresh_s,
        }
    return {
        "scrape_s": args.scrape_s,
        "refresh_s": args.refresh_s,
        "throttle_s": args.throttle_s,
        "rounds": args.rounds,
        "observe_s": args.observe_s,
        "detection_latency": latency,
        "false_positives": {
            kind: sum(len(r["false_positives"][kind]) for r in rounds) for kind in NEAR_MISSES
        },
        "readings_judged_per_near_miss": sum(r["readings"] for r in rounds)
        // (len(FAULTS) + len(NEAR_MISSES)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scrape-s", type=float, default=1.0)
    parser.add_argument("--refresh-s", type=float, default=2.0)
    parser.add_argument("--throttle-s", type=float, default=10.0)
    parser.add_argument("--fill-s", type=float, default=5.0)
    parser.add_argument("--observe-s", type=float, default=30.0)
    parser.add_argument("--blip-s", type=float, default=3.0)
    parser.add_argument("--blip-every-s", type=float, default=8.0)
    report("gpuhealth", asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
