"""``up`` killed and started again, as a user sees it: how soon the API answers.

``mpijob-controller up`` runs on its embedded PostgreSQL and NATS (a fresh data directory)
against a simulated cluster of ``--jobs`` MPIJobs. Printed, per round:

- ``first_start_s``: from ``up`` being started to the API answering ``/api/v1/runs`` (200);
- ``restart_s``: every process of the installation SIGKILLed at once (``up``, its parts,
  nats-server, the postmaster and its backends), then ``up`` started again: seconds until the
  API answers ``/api/v1/runs`` again, and until every part runs (``parts_s``).

    .venv/bin/python -m benchmarks.up_restart [--rounds 3] [--jobs 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import report
from benchmarks.uptree import descendants, kill_everything, start_up, until_answers
from controller.testing import objects as k
from controller.testing.ports import free_port
from controller.testing.simcluster import SimCluster

PARTS = 7
"""Child processes of ``up`` with the default roles: watchers, five consumer roles, the API."""


def until_all_parts(up: subprocess.Popen[bytes], started: float, timeout_s: float = 120) -> float:
    while time.monotonic() - started < timeout_s:
        if len(descendants(up.pid)) >= PARTS + 2:  # up, its parts, nats-server
            return time.monotonic() - started
        time.sleep(0.05)
    raise RuntimeError("up did not start all its parts")


def measure(rounds: int, jobs: int, log_to: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mpijc-up-restart-") as tmp, SimCluster() as sim:
        workdir = Path(tmp)
        for j in range(jobs):
            job = sim.create(k.mpijob(f"job-{j}", workers=2))
            for role, index in [("launcher", None), ("worker", 0), ("worker", 1)]:
                sim.create(k.pod(job, role, index, node=f"node-{j % 8}"))
        port = free_port()
        env = {
            **os.environ,
            "MPIJC_EMBEDDED__DATA_DIR": str(workdir / "data"),
            "MPIJC_EMBEDDED__POSTGRES_PORT": str(free_port()),
            "MPIJC_EMBEDDED__NATS_PORT": str(free_port()),
            "MPIJC_KUBE__KUBECONFIG": str(sim.kubeconfig(workdir / "kubeconfig")),
            "MPIJC_API__PORT": str(port),
            "MPIJC_METRICS__PORT": str(free_port()),
            "MPIJC_API__AUTH": "off",
            "MPIJC_METRICS__UP_PORT": str(free_port()),
        }
        started = time.monotonic()
        up = start_up(env, workdir)
        first = until_answers(port, started)
        until_all_parts(up, started)
        restarts: list[dict[str, float]] = []
        try:
            for _ in range(rounds):
                time.sleep(3)  # the parts settle: the watchers relisted, consumers caught up
                kill_everything(up, workdir / "data")
                started = time.monotonic()
                up = start_up(env, workdir)
                answered = until_answers(port, started)
                restarts.append(
                    {"api_s": round(answered, 2), "parts_s": round(until_all_parts(up, started), 2)}
                )
        finally:
            up.send_signal(signal.SIGTERM)
            up.wait(60)
            if log_to is not None:
                shutil.copy(workdir / "up.log", log_to)
    api = [r["api_s"] for r in restarts]
    return {
        "rounds": rounds,
        "jobs": jobs,
        "first_start_s": round(first, 2),
        "restart_s": restarts,
        "restart_api_s_median": round(statistics.median(api), 2),
        "restart_api_s_max": max(api),
        "cpus": os.cpu_count(),
        "load_1min_at_end": round(os.getloadavg()[0], 1),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--log", type=Path, help="keep up's log in this file")
    args = parser.parse_args()
    report("up_restart", measure(args.rounds, args.jobs, args.log))
