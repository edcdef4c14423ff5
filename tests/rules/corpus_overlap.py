"""Is a candidate blind set new? Its sources and lines against everything the project has read.

Step 1 of "Blind sets" (``tests/rules/corpus/README.md``): a blind text must come from a page
that no in-sample, held-out or earlier blind entry came from, in any form of its address the
project's history holds, and it must not be the same document in another rendering.
``python -m tests.rules.corpus_overlap <folder>`` reads ``failures.yaml`` and
``near_misses.yaml`` in the folder (anywhere, before it is copied into the repository) and
prints, per entry:

- ``source``: its address (a GitHub thread as ``owner/repo#N``, any other page without scheme,
  ``www.``, fragment or trailing slash) appears in the history of the corpus, the rules, the
  troubleshooting page or the benchmarks' README, or in any commit message;
- ``line``: one of its lines of 60 characters or more was added to those files before;
- ``shingle``: it shares a run of ten words with a text of the corpus as it stands (the same
  page quoted elsewhere, or reflowed).

It exits 1 when any entry is flagged; drop those entries before freezing.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.rules.corpus_replay import CORPUS, HELD_OUT, UNEXPLAINED, load
from tests.rules.corpus_score import thread

REPOSITORY = Path(__file__).resolve().parents[2]
HISTORY_PATHS = ("tests/rules", "consumers/rules", "docs/troubleshooting.md", "benchmarks/README.md")
"""Where the project has written what it read: a source or a line seen here is not blind."""
LONG_LINE = 60
SHINGLE = 10

_GITHUB = re.compile(r"github\.com/[\w.-]+/[\w.-]+/(?:issues|pull|discussions)/\d+")
_SHORT = re.compile(r"(?<![\w/.-])[\w.-]+/[\w.-]+#\d+")
_URL = re.compile(r"https?://[^\s)\"'`>\]|,]+")
_WORD = re.compile(r"[A-Za-z0-9_]+")


def page(source: str) -> str:
    """One key per page: ``owner/repo#n`` for a GitHub thread, else the address bare."""
    key = thread(source)
    if "#" in key and "/" in key and " " not in key and not key.startswith("http"):
        return key
    bare = re.sub(r"^https?://", "", source.strip().lower())
    bare = re.sub(r"^www\.", "", bare).split("#", 1)[0]
    return bare.rstrip("/.")


def pages_in(text: str) -> set[str]:
    """Every page named in a text, in any of the forms above."""
    found = {page(match.group(0)) for match in _GITHUB.finditer(text)}
    found |= {page(match.group(0)) for match in _SHORT.finditer(text)}
    found |= {page(match.group(0)) for match in _URL.finditer(text)}
    return found


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPOSITORY), *args], capture_output=True, text=True, check=True)
    return done.stdout


@dataclass(frozen=True)
class Known:
    """What the project has read: pages, long lines, ten-word runs of its corpus."""

    pages: frozenset[str]
    lines: frozenset[str]
    shingles: frozenset[tuple[str, ...]]


def shingles(text: str) -> Iterator[tuple[str, ...]]:
    """Every run of ``SHINGLE`` words of a text, lower-cased, punctuation and layout ignored."""
    words = [word.lower() for word in _WORD.findall(text)]
    for start in range(len(words) - SHINGLE + 1):
        yield tuple(words[start : start + SHINGLE])


def _corpus_texts() -> Iterator[str]:
    for directory in (CORPUS, HELD_OUT, UNEXPLAINED):
        for entry in load(directory):
            yield entry.text


def known() -> Known:
    """Read the history once."""
    patches = _git("log", "-p", "--all", "--", *HISTORY_PATHS)
    messages = _git("log", "--all", "--format=%B")
    added = (
        line[1:].strip()
        for line in patches.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    )
    lines = frozenset(line for line in added if len(line) >= LONG_LINE)
    runs = frozenset(run for text in _corpus_texts() for run in shingles(text))
    return Known(frozenset(pages_in(patches) | pages_in(messages)), lines, runs)


def flags(entry: Mapping[str, object], seen: Known) -> list[str]:
    """Why an entry is not blind; empty when it is."""
    text = str(entry.get("text", ""))
    found = []
    if page(str(entry.get("source", ""))) in seen.pages:
        found.append(f"source {page(str(entry.get('source', '')))}")
    repeated = [
        line.strip()
        for line in text.splitlines()
        if len(line.strip()) >= LONG_LINE and line.strip() in seen.lines
    ]
    if repeated:
        found.append(f"line {repeated[0][:80]!r}")
    if any(run in seen.shingles for run in shingles(text)):
        found.append("shingle")
    return found


def entries(folder: Path) -> Iterable[dict[str, object]]:
    """The candidate set's entries, failures then near-misses."""
    for name in ("failures.yaml", "near_misses.yaml"):
        path = folder / name
        if path.exists():
            yield from yaml.safe_load(path.read_text()) or []


def main(argv: list[str] | None = None) -> int:
    """Print every flagged entry of a candidate set; 1 when any is."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args(argv).folder
    seen = known()
    flagged = 0
    total = 0
    for entry in entries(folder):
        total += 1
        reasons = flags(entry, seen)
        if reasons:
            flagged += 1
            print(f"{entry.get('id')}: {'; '.join(reasons)}")
    print(f"{flagged} of {total} entries are not new")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
