"""The kubelets' side of ``benchmarks.logs`` in a process of its own: a simulated API server
serving one running MPIJob whose containers write their logs at a given rate.

So that the follower's process holds nothing but the follower (its CPU and RSS are its own) and
the server's threads (one per followed container) do not take its interpreter's lock. It prints
one JSON line: the server's URL, the job's ref, its pods; then answers each command read on
standard input with one JSON line: ``open``, the follows open now (``{"open": N}``);
``write RATE SECONDS``, ``RATE`` lines/s spread over the containers in ticks of 50 ms, each line
ending with the nanoseconds it was written at (``{"written": N}``). Standard input closed, it
ends.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid

from controller.testing import objects as k
from controller.testing.simcluster import SimCluster

RUNNING = {"running": {"startedAt": "2026-11-20T10:01:00Z"}}
TICK_S = 0.05


def main(pods: int) -> None:
    with SimCluster() as sim:
        job = k.mpijob(f"bench-{uuid.uuid4().hex[:6]}", workers=pods - 1)
        sim.create(job)
        meta = job["metadata"]
        created = []
        for role, index in [("launcher", None), *(("worker", i) for i in range(pods - 1))]:
            pod = k.with_container_state(k.pod(job, role, index), RUNNING, phase="Running", ready=True)
            sim.create(pod)
            created.append(pod)
        where = [
            (p["metadata"]["namespace"], p["metadata"]["name"], p["spec"]["containers"][0]["name"])
            for p in created
        ]
        ref = {"uid": meta["uid"], "kind": "MPIJob", "namespace": meta["namespace"], "name": meta["name"]}
        print(json.dumps({"url": sim.url, "job": ref, "pods": created}), flush=True)
        for command in sys.stdin:
            match command.split():
                case ["open"]:
                    print(json.dumps({"open": sum(sim.open_log_follows().values())}), flush=True)
                case ["write", rate, seconds]:
                    print(json.dumps({"written": write(sim, where, int(rate), float(seconds))}), flush=True)
                case _:
                    raise SystemExit(f"unknown command {command!r}")


def write(sim: SimCluster, where: list[tuple[str, str, str]], rate: int, seconds: float) -> int:
    """``rate`` lines/s for ``seconds``, spread over the containers; how many were written."""
    per_tick = rate * TICK_S
    written, owed = 0, 0.0
    start = time.perf_counter()
    for tick in range(int(seconds / TICK_S)):
        owed += per_tick
        lines, owed = int(owed), owed - int(owed)
        texts: dict[tuple[str, str, str], str] = {}
        for n in range(lines):  # round robin over the containers, carried over between ticks
            p = (written + n) % len(where)
            texts[where[p]] = texts.get(where[p], "") + f"[1,{p}]<stdout>:tick {tick} {time.time_ns()}\n"
        sim.append_logs(texts)
        written += lines
        time.sleep(max(0.0, start + (tick + 1) * TICK_S - time.perf_counter()))
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pods", type=int, default=500)
    main(parser.parse_args().pods)
