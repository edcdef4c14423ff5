"""Rules corpus benchmark: precision and recall of each rule over the verbatim failure texts.

Every entry of ``tests/rules/corpus`` is replayed through the real rules engine as the run
the watchers would report (``tests/rules/corpus_replay.py``): a failure text in a run that
fails, a near miss in a run that succeeds (and, to judge the patterns alone, in a run that
fails, where only the catch-all ``failed`` may speak). For each rule: how many entries
expect it, how many of those it explained (true positives), how many other entries it fired
on (false positives), precision and recall. ``classified`` counts failures whose expected
rule fired; ``exact`` those where it was the only finding; ``catch_all_only`` failures that
only the catch-all explained. ``replay_seconds`` and ``replay_cpu_seconds`` are the wall
and the process CPU time of the replays (the engine's cost per unit of work).

    .venv/bin/python -m benchmarks.rules_corpus

Prints one JSON document and writes ``benchmarks/results/rules_corpus.json``. No services:
the engine is pure, so this runs in a second on any machine.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from benchmarks.harness import report
from tests.rules.corpus_replay import Entry, ReplayOutcome, load, run


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def measure(entries: list[Entry]) -> dict[str, Any]:
    """The corpus result as a JSON-able dict."""
    started, cpu = time.perf_counter(), time.process_time()
    outcomes: dict[str, ReplayOutcome] = {e.id: run(e, succeed=e.expect is None) for e in entries}
    near_misses_failing = {e.id: run(e) for e in entries if e.expect is None}
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu

    failures = [e for e in entries if e.expect is not None]
    near_misses = [e for e in entries if e.expect is None]
    expected = Counter(str(e.expect) for e in failures)
    true_positive: Counter[str] = Counter()
    false_positive: Counter[str] = Counter()
    for entry in entries:
        for rule in outcomes[entry.id].rules:
            if rule == entry.expect:
                true_positive[rule] += 1
            else:
                false_positive[rule] += 1
    for outcome in near_misses_failing.values():
        for rule in outcome.rules - {"failed"}:
            false_positive[rule] += 1

    rules = sorted({*expected, *true_positive, *false_positive})
    per_rule = {
        rule: {
            "expected": expected.get(rule, 0),
            "true_positives": true_positive[rule],
            "false_positives": false_positive[rule],
            "false_negatives": expected.get(rule, 0) - true_positive[rule],
            "precision": _ratio(true_positive[rule], true_positive[rule] + false_positive[rule]),
            "recall": _ratio(true_positive[rule], expected.get(rule, 0)),
        }
        for rule in rules
    }
    classified = [e.id for e in failures if e.expect in outcomes[e.id].rules]
    exact = [e.id for e in failures if outcomes[e.id].rules == {e.expect}]
    return {
        "entries": len(entries),
        "failures": len(failures),
        "near_misses": len(near_misses),
        "classified": len(classified),
        "classified_pct": round(100 * len(classified) / len(failures), 2) if failures else None,
        "exact": len(exact),
        "catch_all_only": sum(1 for e in failures if outcomes[e.id].rules == {"failed"}),
        "also_not_violations": sorted(e.id for e in failures if outcomes[e.id].rules & set(e.also_not)),
        "near_miss_false_findings": {
            "in_a_succeeded_run": sum(1 for e in near_misses if outcomes[e.id].changes),
            "in_a_failed_run_besides_the_catch_all": sum(
                1 for o in near_misses_failing.values() if o.rules - {"failed"}
            ),
        },
        "missed": sorted(e.id for e in failures if e.id not in classified),
        "not_exact": {e.id: sorted(outcomes[e.id].rules) for e in failures if e.id not in exact},
        "per_rule": per_rule,
        "replay_seconds": round(elapsed, 3),
        "replay_cpu_seconds": round(cpu, 3),
    }


def main() -> None:
    report("rules_corpus", measure(load()))


if __name__ == "__main__":
    main()
