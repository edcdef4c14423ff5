"""Idle cost: what an installation with nothing to do spends, per minute.

Every consumer role runs as its own ``mpijob-controller consume --only NAME`` process, as
deployed (history, rules, notify, dispatch, audit), on the embedded PostgreSQL and NATS, with
nothing published. After ``--settle`` seconds, for ``--seconds`` seconds: the CPU time of the
consumer processes, of the NATS server and of PostgreSQL (from ``/proc``), scaled to a minute,
and the pull requests the NATS server received (``$JS.API.CONSUMER.MSG.NEXT.>``, seen by a
subscriber of this process).

    .venv/bin/python -m benchmarks.idle [--seconds 30] [--settle 5]

Prints one JSON document and writes ``benchmarks/results/idle.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

from nats.aio.msg import Msg

from benchmarks.harness import cpu_s, pipeline_services, report

ROLES = ("history", "rules", "notify", "dispatch", "audit")


def cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of the controller's processes, the NATS server and PostgreSQL."""
    used = {"consumers": 0.0, "nats-server": 0.0, "postgres": 0.0}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            seconds = cpu_s(proc.name)
        except OSError:
            continue
        if "controller.cli consume" in command:
            used["consumers"] += seconds
        elif "nats-server" in command:
            used["nats-server"] += seconds
        elif command.startswith("postgres") or "/postgres " in command:
            used["postgres"] += seconds
    return used


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the measurement")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after every process is ready")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-") as tmp:
        async with pipeline_services(Path(tmp), ROLES) as env:
            await asyncio.sleep(args.settle)
            requests = 0

            async def count(_: Msg) -> None:
                nonlocal requests
                requests += 1

            sub = await env.nc.subscribe("$JS.API.CONSUMER.MSG.NEXT.>", cb=count)
            before = cpu_seconds()
            await asyncio.sleep(args.seconds)
            after = cpu_seconds()
            await sub.unsubscribe()
    per_minute = 60 / args.seconds
    result = {
        "benchmark": "idle",
        "roles": list(ROLES),
        "seconds": args.seconds,
        "cpu_seconds_per_minute": {
            name: round((after[name] - before[name]) * per_minute, 2) for name in before
        },
        "pull_requests_per_minute": round(requests * per_minute),
    }
    report("idle", result)


if __name__ == "__main__":
    asyncio.run(main())
