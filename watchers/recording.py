"""The capture/replay file format: watch events as JSON Lines.

One line per observed change, as ``capture`` writes it::

    {"type": "MODIFIED", "object": {...full Kubernetes object...},
     "observed_at": "2026-11-20T10:00:05Z", "logs": {"worker": "last lines…"}}

``logs`` is present only where a container terminated with an error and its log tail was
fetched. ``replay`` also reads what ``kubectl get -w -o json`` prints: concatenated,
pretty-printed objects, bare (taken as ADDED the first time a uid is seen, MODIFIED after)
or wrapped in ``--output-watch-events`` envelopes, and ``kind: List`` documents.

Bad input never stops a replay: a line that is not JSON or an object of a kind we do not
watch is counted in :class:`ReadStats` and skipped, with its line number in the log.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from controller.contract.events import Change
from controller.contract.kinds import KINDS as JOB_KINDS
from watchers.correlating import ObjectKind, Observation
from watchers.normalizing import MalformedObject, error_terminated, parse_time

log = logging.getLogger(__name__)

KINDS: dict[str, ObjectKind] = {
    **{spec.kind: "job" for spec in JOB_KINDS},
    "Pod": "pod",
    "Event": "event",
    "Node": "node",
}
CHANGES: dict[str, Change] = {"ADDED": "ADDED", "MODIFIED": "MODIFIED", "DELETED": "DELETED"}


@dataclass
class ReadStats:
    """What a replay read, and what it had to skip."""

    records: int = 0
    malformed: int = 0
    unknown_kind: int = 0
    skipped_kinds: dict[str, int] = field(default_factory=dict)


def object_kind(obj: Mapping[str, Any]) -> ObjectKind | None:
    """Which watch an object belongs to; ``None`` for kinds we do not watch."""
    return KINDS.get(str(obj.get("kind")))


def bounded_tail(text: str, lines: int, limit_bytes: int) -> tuple[str, ...]:
    """The last ``lines`` lines of ``text``, at most ``limit_bytes`` bytes in all."""
    kept: list[str] = []
    size = 0
    for line in reversed(text.splitlines()[-lines:] if lines > 0 else []):
        size += len(line.encode()) + 1
        if size > limit_bytes:
            break
        kept.append(line)
    return tuple(reversed(kept))


def _documents(text: str) -> Iterator[tuple[int, Any]]:
    """Every JSON value in ``text`` (JSON Lines or concatenated objects), with its line number."""
    decoder = json.JSONDecoder()
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            end = text.find("\n", pos)
            yield line, MalformedObject(f"line {line}: not JSON ({exc.msg})")
            pos = len(text) if end < 0 else end + 1
            continue
        yield line, value


def read_observations(
    path: Path, *, log_tail_lines: int = 50, log_tail_bytes: int = 16384, stats: ReadStats | None = None
) -> Iterator[Observation]:
    """Observations from a capture file or ``kubectl get -w -o json`` output, in file order."""
    stats = stats if stats is not None else ReadStats()
    seen: set[str] = set()
    for line, doc in _documents(path.read_text()):
        if isinstance(doc, MalformedObject) or not isinstance(doc, dict):
            stats.malformed += 1
            log.warning(
                "%s:%d skipped: %s", path, line, doc if isinstance(doc, Exception) else "not an object"
            )
            continue
        envelopes = (
            [{"object": item} for item in doc.get("items", [])]
            if str(doc.get("kind", "")).endswith("List")
            else [doc if isinstance(doc.get("object"), dict) else {"object": doc}]
        )
        for envelope in envelopes:
            observation = _observation(envelope, seen, log_tail_lines, log_tail_bytes)
            if isinstance(observation, str):
                stats.unknown_kind += 1
                stats.skipped_kinds[observation] = stats.skipped_kinds.get(observation, 0) + 1
                log.debug("%s:%d skipped object of kind %s", path, line, observation)
                continue
            if observation is None:
                stats.malformed += 1
                log.warning("%s:%d skipped: no metadata.uid or bad change type", path, line)
                continue
            stats.records += 1
            yield observation


def _observation(
    envelope: Mapping[str, Any], seen: set[str], lines: int, limit_bytes: int
) -> Observation | str | None:
    obj = envelope["object"]
    kind = object_kind(obj)
    if kind is None:
        return str(obj.get("kind", "?"))
    uid = (obj.get("metadata") or {}).get("uid")
    change: Change | None = CHANGES.get(envelope.get("type") or ("MODIFIED" if uid in seen else "ADDED"))
    if not isinstance(uid, str) or change is None:
        return None
    seen.add(uid)
    try:
        observed_at = parse_time(envelope.get("observed_at")) or datetime.now(UTC)
    except MalformedObject:
        return None
    logs: Mapping[str, str] = envelope.get("logs") or {}
    tail = tuple(
        line
        for name in (error_terminated(obj) if kind == "pod" else ())
        if name in logs
        for line in bounded_tail(logs[name], lines, limit_bytes)
    )
    return Observation(kind, change, obj, observed_at, tail)


def write_record(
    out: IO[str],
    change: Change,
    obj: Mapping[str, Any],
    observed_at: datetime,
    logs: Mapping[str, str] | None,
) -> None:
    """Append one capture line."""
    record: dict[str, Any] = {
        "type": change,
        "object": obj,
        "observed_at": observed_at.isoformat().replace("+00:00", "Z"),
    }
    if logs:
        record["logs"] = dict(logs)
    out.write(json.dumps(record, separators=(",", ":")) + "\n")
