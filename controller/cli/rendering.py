"""What the commands print: aligned tables (and lines) for a terminal, or JSON or YAML for a
program.

The JSON and YAML are the API's own answer (``RunPage``, ``Comparison``; ``findings`` adds the run
it is about), keys sorted, one document per command, so a script reads what ``docs/api.md``
describes, times in RFC 3339 UTC as the API gives them. What a person reads has one time form,
UTC: ``2026-11-20 10:00:00`` (:func:`when`; log lines add milliseconds), and one duration form, the
largest two units (``42s``, ``9m30s``, ``2h05m``, ``3d04h``: :func:`human_duration`); a run still
going shows how long so far. A table's cell is at most :data:`MAX_CELL` characters wide, wrapped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tabulate import tabulate

__all__ = [
    "DOCUMENTS",
    "MAX_CELL",
    "as_json",
    "comparison_table",
    "document",
    "findings_table",
    "human_duration",
    "record",
    "runs_table",
    "when",
]

DOCUMENTS = ("json", "yaml")
"""The ``-o`` choices that print the API's answer rather than a table."""
MAX_CELL = 60
"""Widest table cell, in characters: a longer value (a spec's command line, a root cause) wraps
onto more lines, so a comparison of five runs still fits a wide terminal."""
_SEVERITY = {"critical": 0, "warning": 1, "info": 2}


def as_json(document: Any) -> str:
    """``document`` as stable JSON: keys sorted, indented, non-ASCII kept."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)


def document(answer: Any, output: str) -> str:
    """``answer`` as ``-o json`` or ``-o yaml`` print it (keys sorted)."""
    if output == "json":
        return as_json(answer)
    import yaml  # only a command asked for YAML pays for its import

    return yaml.safe_dump(answer, sort_keys=True, allow_unicode=True, default_flow_style=False).rstrip()


def record(item: Any, output: str) -> str:
    """One record of a stream as ``-o json`` (a line of JSON Lines) or ``-o yaml`` (an item of one
    YAML list, so the printed items together are that list) print it, keys sorted."""
    if output == "json":
        return json.dumps(item, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return document([item], output)


def when(value: str | None, *, millis: bool = False) -> str:
    """An RFC 3339 time as a person reads it, in UTC: ``2026-11-20 10:00:00`` (``.123`` with
    ``millis``); ``-`` for none."""
    at = _when(value)
    if at is None:
        return "-"
    text = at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f" if millis else "%Y-%m-%d %H:%M:%S")
    return text[:-3] if millis else text


def human_duration(seconds: float | None) -> str:
    """``42s``, ``9m30s``, ``2h05m``, ``3d04h``; ``-`` for none."""
    if seconds is None:
        return "-"
    whole = max(0, round(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _between(start: str | None, end: str | None) -> float | None:
    first, last = _when(start), _when(end)
    return (last - first).total_seconds() if first and last else None


def _table(rows: Sequence[Sequence[object]], headers: Sequence[str]) -> str:
    return tabulate(
        [["-" if cell is None else cell for cell in row] for row in rows],
        headers=list(headers),
        tablefmt="plain",
        disable_numparse=True,
        maxcolwidths=MAX_CELL,
    )


def run_duration(run: Mapping[str, Any], now: datetime) -> str:
    """Created → finished; created → deleted for a run deleted unfinished; created → now, "so far"."""
    if run.get("finished_at"):
        return human_duration(_between(run["created_at"], run["finished_at"]))
    if run.get("deleted_at"):
        return f"{human_duration(_between(run['created_at'], run['deleted_at']))} (deleted)"
    return f"{human_duration(_between(run['created_at'], now.isoformat()))} so far"


def runs_table(runs: Sequence[Mapping[str, Any]], now: datetime, *, wide: bool = False) -> str:
    """One line per run, newest first as the API lists them; ``wide`` adds when each started and
    finished (or was deleted) and its labels."""
    rows = [
        (
            run["namespace"],
            run["name"],
            run["attempt"],
            run["kind"],
            run["phase"],
            when(run["created_at"]),
            run_duration(run, now),
            run["uid"],
            *(
                (
                    when(run.get("started_at")),
                    when(run.get("finished_at") or run.get("deleted_at")),
                    ",".join(f"{k}={v}" for k, v in sorted((run.get("labels") or {}).items())) or "-",
                )
                if wide
                else ()
            ),
        )
        for run in runs
    ]
    headers: tuple[str, ...] = (
        "NAMESPACE",
        "NAME",
        "ATTEMPT",
        "KIND",
        "PHASE",
        "CREATED (UTC)",
        "DURATION",
        "UID",
    )
    if wide:
        headers += ("STARTED (UTC)", "ENDED (UTC)", "LABELS")
    return _table(rows, headers)


def run_title(run: Mapping[str, Any]) -> str:
    """``team-a/train attempt 2 (MPIJob, Failed) uid …``."""
    return (
        f"{run['namespace']}/{run['name']} attempt {run['attempt']} "
        f"({run['kind']}, {run['phase']}) uid {run['uid']}"
    )


def findings_table(run: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> str:
    """The run, its findings (firing first, then by severity), and what to do about the firing ones."""
    ordered = sorted(
        findings, key=lambda f: (f.get("status") != "firing", _SEVERITY.get(f.get("severity", ""), 9))
    )
    lines = [run_title(run)]
    if not ordered:
        return "\n".join([*lines, "no findings"])
    rows = [
        (f["severity"], f["status"], f["rule"], when(f["first_seen"]), when(f["last_seen"]), f["root_cause"])
        for f in ordered
    ]
    lines.append(
        _table(rows, ("SEVERITY", "STATUS", "RULE", "FIRST SEEN (UTC)", "LAST SEEN (UTC)", "ROOT CAUSE"))
    )
    for finding in ordered:
        if finding["status"] != "firing" or not (finding.get("remediation") or finding.get("doc_anchor")):
            continue
        lines.append("")
        lines.append(f"{finding['rule']}: what to do")
        lines += [f"  - {step}" for step in finding.get("remediation") or ()]
        if finding.get("doc_anchor"):
            lines.append(f"  see {finding['doc_anchor']}")
    return "\n".join(lines)


def _terminations(pods: Sequence[Mapping[str, Any]]) -> str:
    ended = [
        f"{pod['role']}-{pod['index']}:{t.get('reason') or 'exit'}({t.get('exit_code')})"
        if pod.get("index") is not None
        else f"{pod['role']}:{t.get('reason') or 'exit'}({t.get('exit_code')})"
        for pod in pods
        for t in pod.get("terminations") or ()
    ]
    return ", ".join(ended) or "-"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def comparison_table(comparison: Mapping[str, Any], *, all_spec: bool = False) -> str:
    """One column per run, in the order asked: outcome, durations, restarts and terminations, failure
    causes, each pod's peak memory (when usage was read), then the spec fields that differ (every
    field with ``all_spec``) and the causes in words."""
    compared = comparison["runs"]
    durations = [c["durations"] for c in compared]

    def row(label: str, values: Sequence[object]) -> list[object]:
        return [label, *values]

    rows = [
        row(
            "RUN",
            [f"{c['run']['namespace']}/{c['run']['name']} attempt {c['run']['attempt']}" for c in compared],
        ),
        row("UID", [c["run"]["uid"] for c in compared]),
        row("OUTCOME", [c["outcome"] for c in compared]),
        row("CREATED (UTC)", [when(c["run"]["created_at"]) for c in compared]),
        row("QUEUED", [human_duration(d.get("queued_s")) for d in durations]),
        row("TO ALL WORKERS RUNNING", [human_duration(d.get("to_all_workers_running_s")) for d in durations]),
        row("RUNNING", [human_duration(d.get("running_s")) for d in durations]),
        row("TOTAL", [human_duration(d.get("total_s")) for d in durations]),
        row("RESTARTS", [sum(p.get("restarts") or 0 for p in c["pods"]) for c in compared]),
        row("TERMINATIONS", [_terminations(c["pods"]) for c in compared]),
        row("FAILURE CAUSES", [", ".join(f["rule"] for f in c["failure_causes"]) or "-" for c in compared]),
        *(
            row(f"PEAK MEMORY {u['slot']}", [p or "-" for p in u["memory_peaks"]])
            for u in comparison.get("usage", ())
        ),
    ]
    shown = [f for f in comparison["spec"] if all_spec or f["differs"]]
    if shown:
        rows.append(row("", ["" for _ in compared]))
        rows += [
            row(("* " if f["differs"] else "  ") + f["path"], [_cell(v) for v in f["values"]]) for f in shown
        ]
    lines = [_table(rows, ["", *(f"#{i}" for i in range(1, len(compared) + 1))])]
    if not shown:
        lines.append("")
        lines.append("the recorded specs are the same")
    elif not all_spec:
        same = len(comparison["spec"]) - len(shown)
        lines.append("")
        lines.append(f"* differs; {same} other spec fields are the same (--all-spec shows them)")
    causes = [(i, cause) for i, c in enumerate(compared, 1) for cause in c["failure_causes"]]
    if causes:
        lines.append("")
        lines += [f"#{i} {cause['rule']} ({cause['severity']}): {cause['root_cause']}" for i, cause in causes]
    return "\n".join(lines)
