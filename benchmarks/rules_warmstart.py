"""The rules' warm start in process: what a partition's snapshot costs to take back in, in CPU.

``--runs`` runs (a launcher and four workers each, one run in three with a worker killed for
memory, so a third hold a firing finding) are folded into an engine and written as the snapshot
writes them; then, ``--rounds`` times, each key is read back (:func:`_run_from_json`), the runs
are restored into an empty engine and ticked once, as :meth:`RulesService.warm_start` does
after the load, the garbage collector paced as the processes pace it (the bucket's round trips
are not in it; ``benchmarks.coldstart --up`` logs a whole warm start). CPU seconds of the calling thread,
the median of the rounds (the least over the pairs):

- ``load_cpu_s``: the keys read back;
- ``warm_cpu_s``: read back, restored and ticked.

Each side runs in a fresh child process (measured in the benchmark's own process, with the
harness imported, the two sides came out 1-3 % apart where fresh processes put them 7-13 %).
``--baseline DIR`` measures the same with ``DIR`` (a detached worktree of an older commit) first
on the path, so old and new code are timed in one run, alternately ``--pairs`` times.

    .venv/bin/python -m benchmarks.rules_warmstart [--runs 800 --rounds 5 --baseline /tmp/old --pairs 3]

Prints one JSON document and writes ``benchmarks/results/rules_warmstart.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from consumers.rules import RuleEngine
from consumers.rules.engine import HeldRun
from consumers.rules.snapshot import _run_from_json, _run_to_json
from controller.cli.collecting import pace_collector
from controller.testing.events import at, job, launcher, ref, terminated, worker

ROOT = str(Path(__file__).resolve().parent.parent)


def _payloads(runs: int) -> list[tuple[str, bytes]]:
    engine = RuleEngine()
    for i in range(runs):
        run = ref(name=f"run-{i}", uid=f"uid-run-{i:05d}")
        events = [
            job("Running", observed_at=at(0), job=run),
            launcher(observed_at=at(0), job=run),
            *(worker(w, observed_at=at(0), job=run) for w in range(4)),
        ]
        if i % 3 == 0:
            oom = (terminated("OOMKilled", 137),)
            events.append(worker(2, phase="Failed", ready=False, containers=oom, observed_at=at(1), job=run))
        for event in events:
            engine.observe(event, event.observed_at)
    return [(uid, _run_to_json(held)) for uid, held in engine.held.items()]


def _cpu(work: Callable[[], object], rounds: int) -> float:
    took = []
    for _ in range(rounds):
        started = time.thread_time()
        work()
        took.append(time.thread_time() - started)
    return round(statistics.median(took), 4)


def measure(runs: int, rounds: int) -> dict[str, Any]:
    """The warm start's CPU for ``runs`` runs with the code on the path, the collector paced as
    in the consumer processes."""
    pace_collector()
    payloads = _payloads(runs)

    def load() -> list[tuple[str, HeldRun]]:
        return [(uid, _run_from_json(payload)) for uid, payload in payloads]

    def warm() -> object:
        held = load()
        held.sort(key=lambda item: item[1].touched_at)
        engine = RuleEngine()
        engine.restore(held, ())
        return engine.tick(at(2))

    return {
        "runs": runs,
        "bytes_per_run": sum(len(payload) for _, payload in payloads) // runs,
        "load_cpu_s": _cpu(load, rounds),
        "warm_cpu_s": _cpu(warm, rounds),
    }


def _child(directory: str, runs: int, rounds: int) -> dict[str, Any]:
    """:func:`measure` in a child process with ``directory``'s code first on the path."""
    code = (
        "import importlib.util, json, sys; sys.path.insert(0, sys.argv[1]); "
        "spec = importlib.util.spec_from_file_location('warmstart', sys.argv[4]); "
        "bench = importlib.util.module_from_spec(spec); spec.loader.exec_module(bench); "
        "print(json.dumps(bench.measure(int(sys.argv[2]), int(sys.argv[3]))))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((directory, ROOT))}
    out = subprocess.run(
        [sys.executable, "-c", code, directory, str(runs), str(rounds), __file__],
        env=env,
        check=True,
        capture_output=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main() -> None:
    from benchmarks.harness import report

    parser = argparse.ArgumentParser(prog="python -m benchmarks.rules_warmstart", description=__doc__)
    parser.add_argument("--runs", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", help="a worktree of the older code to time beside this one")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    sides = {"this": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
    measured: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for _ in range(args.pairs if args.baseline else 1):
        for side, directory in sides.items():
            measured[side].append(_child(directory, args.runs, args.rounds))
    result: dict[str, Any] = {
        side: {**runs[0], **{key: min(run[key] for run in runs) for key in ("load_cpu_s", "warm_cpu_s")}}
        for side, runs in measured.items()
    }
    if args.baseline:
        for key in ("load_cpu_s", "warm_cpu_s"):
            result[f"{key}_ratio"] = round(result["this"][key] / result["baseline"][key], 3)
    report("rules_warmstart", result)


if __name__ == "__main__":
    main()
