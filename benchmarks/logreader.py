"""The API's side of ``benchmarks.logs`` in a process of its own: a reader following one run on
``LOGS`` as ``GET /api/v1/runs/{uid}/logs?follow=true`` does (:func:`controller.bus.logstore.read_raw`),
noting for each line written by :mod:`benchmarks.logwriter` (its text ends with the nanoseconds
it was written at) when it was stored on the bus and when it was read.

It prints ``{"ready": true}`` once following; told ``seen N`` on standard input, it waits until
``N`` lines were read (failing after 60 s) and prints the latencies, written → stored and written →
read, p50/p99/max, and its own CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from typing import Any

from controller.bus.logstore import parsed_batches, read_raw
from controller.bus.streams import connect
from controller.contract.subjects import Topology
from controller.testing.waits import until


def _percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values) or [float("nan")]
    return {
        "p50_ms": round(ordered[len(ordered) // 2], 1),
        "p99_ms": round(ordered[int(len(ordered) * 0.99)], 1),
        "max_ms": round(ordered[-1], 1),
    }


async def main(args: argparse.Namespace) -> None:
    nc = await connect(args.nats, "bench-log-reader")
    js = nc.jetstream()
    topology = Topology(args.prefix)
    stored_ms: list[float] = []
    read_ms: list[float] = []
    following = asyncio.Event()

    async def read() -> None:
        async for stored in parsed_batches(
            read_raw(
                js, topology, topology.run_logs(args.namespace, args.job, args.uid), follow=True, wait_s=0.2
            )
        ):
            following.set()
            if stored is None:
                continue
            now, at = time.time_ns(), stored.at.timestamp() * 1e9
            for line in stored.batch.lines:
                sent = line.text.rsplit(" ", 1)[-1]
                if sent.isdigit():
                    read_ms.append((now - int(sent)) / 1e6)
                    stored_ms.append((at - int(sent)) / 1e6)

    reading = asyncio.create_task(read())
    await following.wait()  # the first heartbeat: the consumer exists
    print(json.dumps({"ready": True}), flush=True)
    loop = asyncio.get_running_loop()
    command = await loop.run_in_executor(None, sys.stdin.readline)
    expected = int(command.split()[1])
    await until(lambda: len(read_ms) >= expected or reading.done(), 60.0, interval_s=0.05)
    if reading.done():
        reading.result()
    reading.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await reading
    result: dict[str, Any] = {
        "lines_read": len(read_ms),
        "written_to_stored": _percentiles(stored_ms),
        "written_to_read": _percentiles(read_ms),
        "cpu_s": round(time.process_time(), 2),
    }
    print(json.dumps(result), flush=True)
    await nc.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    for name in ("nats", "prefix", "namespace", "job", "uid"):
        parser.add_argument(f"--{name}", required=True)
    asyncio.run(main(parser.parse_args()))
