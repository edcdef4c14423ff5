"""Precision and recall of the rules on a corpus split, entry by entry through the real engine.

Each failure text is replayed as the run that failed (``corpus_replay.run``); the rules that
fire at the end, the catch-all ``failed`` aside, are its verdict:

- exactly the expected rule: a true positive of that rule;
- the expected rule missing: a false negative of it (the catch-all alone says nothing specific);
- any other rule firing: a false positive of that rule.

A near-miss is replayed twice, in a run that succeeds and in one that fails; every specific
rule firing in either is a false positive. Precision is TP / (TP + FP), recall TP / (TP + FN),
over all rules (micro) and per rule. ``python -m tests.rules.corpus_score`` prints the report
of both splits.

A *blind set* (``tests/rules/corpus/blind/<date>/``) is a third split, frozen before the
signatures are extended: its ``MANIFEST`` records the day it was frozen, the commit whose
code scored it and the SHA-256 of each file. ``python -m tests.rules.corpus_score --blind
tests/rules/corpus/blind/<date>`` checks the files against the manifest (an edited set is
refused), then prints the same report and the near-misses per rule
(``tests/rules/corpus/README.md``, "Blind sets").
"""

from __future__ import annotations

import argparse
import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import CORPUS, HELD_OUT, Entry, load, run

BLIND = CORPUS / "blind"
"""One folder per blind set, named for the day it was frozen; never loaded with the others."""
TEXT_RULES: tuple[RuleId, ...] = (
    "oom",
    "gpu-oom",
    "gpu-error",
    "segfault",
    "disk-full",
    "quota",
    "rendezvous",
    "mpi-comm",
    "mpi-abort",
)
"""The rules that read texts (log tails, termination messages, event messages): each needs near-misses."""
NEAR_MISSES_PER_RULE = 3

_THREAD = re.compile(r"github\.com/(?P<repo>[^/\s]+/[^/\s]+)/(?:issues|pull|discussions)/(?P<number>\d+)")
_SHORT = re.compile(r"^(?P<repo>[^/\s#]+/[^/\s#]+)#(?P<number>\d+)$")


def thread(source: str) -> str:
    """``owner/repo#123`` for a GitHub thread, whether written as an address or short; else as is."""
    match = _THREAD.search(source) or _SHORT.match(source.strip())
    return f"{match.group('repo')}#{match.group('number')}".lower() if match else source.strip().lower()


@dataclass
class Score:
    """Counts per rule, and what went wrong where."""

    tp: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float:
        tp, fp = sum(self.tp.values()), sum(self.fp.values())
        return tp / (tp + fp) if tp + fp else 1.0

    @property
    def recall(self) -> float:
        tp, fn = sum(self.tp.values()), sum(self.fn.values())
        return tp / (tp + fn) if tp + fn else 1.0

    def rule(self, rule: str) -> tuple[float, float]:
        """(precision, recall) of one rule."""
        tp, fp, fn = self.tp[rule], self.fp[rule], self.fn[rule]
        return (tp / (tp + fp) if tp + fp else 1.0, tp / (tp + fn) if tp + fn else 1.0)


def score(entries: list[Entry]) -> Score:
    """Replay every entry and count."""
    result = Score()
    for entry in entries:
        if entry.expect is None:
            fired = (run(entry, succeed=True).rules | run(entry).rules) - {"failed"}
            for rule in sorted(fired):
                result.fp[rule] += 1
                result.wrong.append(f"{entry.id}: near-miss raised {rule}")
            continue
        fired = run(entry).rules - {"failed"}
        if entry.expect in fired:
            result.tp[entry.expect] += 1
        else:
            result.fn[entry.expect] += 1
            result.wrong.append(f"{entry.id}: {entry.expect} missed")
        for rule in sorted(fired - {entry.expect}):
            result.fp[rule] += 1
            result.wrong.append(f"{entry.id}: {rule} fired instead of / beside {entry.expect}")
    return result


def summary(name: str, entries: list[Entry], result: Score) -> str:
    """One line: ``held-out: 34 failures, 4 near-misses — precision 1.00 (30/30), recall 0.88 (30/34)``."""
    failures = sum(1 for e in entries if e.expect is not None)
    tp, fp, fn = sum(result.tp.values()), sum(result.fp.values()), sum(result.fn.values())
    return (
        f"{name}: {failures} failures, {len(entries) - failures} near-misses — "
        f"precision {result.precision:.2f} ({tp}/{tp + fp}), recall {result.recall:.2f} ({tp}/{tp + fn})"
    )


def report(name: str, entries: list[Entry], result: Score) -> str:
    """The summary line, a line per rule and what went wrong."""
    rules = sorted(set(result.tp) | set(result.fp) | set(result.fn))
    lines = [summary(name, entries, result)]
    for rule in rules:
        precision, recall = result.rule(rule)
        lines.append(
            f"  {rule:<10} TP {result.tp[rule]:>3}  FP {result.fp[rule]:>2}  FN {result.fn[rule]:>2}  "
            f"precision {precision:.2f}  recall {recall:.2f}"
        )
    lines.extend(f"  ! {w}" for w in result.wrong)
    return "\n".join(lines)


@dataclass(frozen=True)
class Manifest:
    """What a blind set's ``MANIFEST`` records."""

    frozen: str
    code: str
    files: dict[str, str]


def sha256(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(directory: Path) -> Manifest:
    """The blind set's manifest, after checking every corpus file against its recorded hash.

    Raises ``ValueError`` when a file was edited, added or removed since the set was frozen.
    """
    raw = yaml.safe_load((directory / "MANIFEST").read_text())
    recorded = {str(k): str(v) for k, v in raw["files"].items()}
    present = {p.name: sha256(p) for p in sorted(directory.glob("*.yaml"))}
    if present != recorded:
        changed = sorted(set(present) ^ set(recorded) | {n for n in present if recorded.get(n) != present[n]})
        raise ValueError(f"{directory}: files differ from the MANIFEST frozen {raw['frozen']}: {changed}")
    return Manifest(frozen=str(raw["frozen"]), code=str(raw["code"]), files=recorded)


def near_miss_coverage(entries: Iterable[Entry]) -> Counter[str]:
    """How many near-misses name each rule's failure words (their ``near`` field)."""
    return Counter(rule for e in entries if e.expect is None for rule in e.near)


def blind_report(directory: Path) -> str:
    """The verified blind set's report: the summary, per rule, and near-misses per rule."""
    frozen = manifest(directory)
    entries = load(directory)
    name = f"blind (frozen {frozen.frozen}), code {frozen.code}"
    coverage = near_miss_coverage(entries)
    lines = [report(name, entries, score(entries)), "  near-misses per rule:"]
    lines.extend(f"    {rule:<10} {coverage[rule]}" for rule in TEXT_RULES)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.rules.corpus_score")
    parser.add_argument("--blind", type=Path, help="score one frozen blind set (checks its MANIFEST first)")
    args = parser.parse_args(argv)
    if args.blind is not None:
        print(blind_report(args.blind))
        return
    for name, directory in (("in-sample", CORPUS), ("held-out", HELD_OUT)):
        entries = load(directory)
        print(report(name, entries, score(entries)))


if __name__ == "__main__":
    main()
