"""The rules' live log reader: what reading every followed line against the signature catalog costs.

One process, no services (the reader's work is pure; the bus around it is measured by
``benchmarks.logs``). A stored batch of ``--lines`` lines of about 100 characters, one line in
``--every`` a signature line (a CUDA out-of-memory), as the follower stores it:

- ``reader``: the batch decoded from its JSON and passed through :func:`consumers.rules.logreader.told`
  (the RE2 set over every pattern of the catalog, the marks, the ranks), lines/s;
- ``reference``: the least a reader can do with the same batch — decode it and look at each line
  once with one RE2 expression (a literal) — lines/s, and the ratio;
- ``python_re``: the catalog's patterns tried one by one with Python's ``re`` on every line (what
  the set saves), lines/s.

    .venv/bin/python -m benchmarks.rules_live [--lines 20000 --every 100 --rounds 3]

Prints one JSON document and writes ``benchmarks/results/rules_live.json``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import re2

from benchmarks.harness import report
from consumers.rules.live import SIGNS
from consumers.rules.logreader import told
from controller.contract.logs import LogBatch
from controller.testing.events import at, log_batch

OOM = "[1,3]<stderr>:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 3)"


def _payload(lines: int, every: int) -> bytes:
    text = [
        OOM
        if i % every == every - 1
        else f"[1,{i % 16}]<stdout>:epoch 3 step {i} loss 2.{i % 97:02d} lr 3.0e-4 tok/s 41234 mem 61.2GiB"
        for i in range(lines)
    ]
    return log_batch(*text, observed_at=at(1), step_s=0.001).model_dump_json().encode()


def _rate(lines: int, work: Callable[[], object], rounds: int) -> float:
    took = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        took.append(time.perf_counter() - started)
    return round(lines / statistics.median(took))


def measure(lines: int, every: int, rounds: int) -> dict[str, Any]:
    payload = _payload(lines, every)
    literal = re2.compile("CUDA out of memory")
    patterns = [sign.pattern for sign in SIGNS]

    def reader() -> object:
        return told(LogBatch.model_validate_json(payload), at(2))

    def reference() -> object:
        batch = LogBatch.model_validate_json(payload)
        return sum(1 for line in batch.lines if literal.search(line.text))

    def python_re() -> object:
        batch = LogBatch.model_validate_json(payload)
        return sum(1 for line in batch.lines if any(p.search(line.text) for p in patterns))

    seen = reader()
    rates = {
        name: _rate(lines, work, rounds)
        for name, work in (("reader", reader), ("reference", reference), ("python_re", python_re))
    }
    return {
        "lines": lines,
        "signature_every": every,
        "signatures_in_catalog": len(SIGNS),
        "marks_per_batch": len(getattr(seen, "marks", ())),
        "lines_per_s": rates,
        "ratio_to_reference": round(rates["reader"] / rates["reference"], 3),
        "set_speedup_over_python_re": round(rates["reader"] / rates["python_re"], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rules_live", description=__doc__)
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report("rules_live", measure(args.lines, args.every, args.rounds))


if __name__ == "__main__":
    main()
