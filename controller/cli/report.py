"""Reports of the history store for the terminal (``history``, ``demo``): the runs as ``runs``
prints them (:func:`controller.cli.rendering.runs_table`: the same columns, the one time form and
the one duration form), then each run's pods, findings and timeline; or, for ``-o json|yaml``, the
same as one document, times in RFC 3339 UTC."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.cli import rendering
from controller.store import queries

__all__ = ["history"]

_RUN = ("uid", "kind", "namespace", "name", "attempt", "previous_uid", "phase", "labels")
_RUN_TIMES = ("created_at", "started_at", "finished_at", "deleted_at")
"""A run's fields in the document: those of the API's ``RunSummary`` (docs/api.md)."""


def _rfc3339(value: Any) -> Any:
    """A time as machine output carries it (``2026-11-20T10:00:00Z``); anything else as it is."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def _fields(row: Any, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A stored row's columns (``keys``: those only), times in RFC 3339 UTC."""
    names = keys or tuple(column.key for column in inspect(row).mapper.column_attrs)
    return {name: _rfc3339(getattr(row, name)) for name in names}


async def history(
    conn: AsyncConnection,
    namespace: str | None = None,
    name: str | None = None,
    limit: int = 20,
    kind: str | None = None,
    output: str = "table",
    now: datetime | None = None,
) -> str:
    """Runs (of one ``kind``, if given), newest first, with each run's pods, findings and
    timeline: a table and sections (``wide``: the runs' wide columns), or one JSON or YAML document
    (``{"items": [run, …]}``, each run with ``pods``, ``findings`` and ``timeline``)."""
    where = queries.RunFilter(namespace=namespace, name=name, kind=kind)
    runs = await queries.list_runs(conn, where, limit=limit)
    items = []
    for run in runs:
        item = _fields(run, _RUN + _RUN_TIMES)
        item["pods"] = [_fields(pod) for pod in await queries.run_pods(conn, run.uid)]
        item["findings"] = [_fields(finding) for finding in await queries.run_findings(conn, run.uid)]
        item["timeline"] = [
            _fields(entry, ("at", "source", "summary")) for entry in await queries.run_timeline(conn, run.uid)
        ]
        items.append(item)
    if output in rendering.DOCUMENTS:
        return rendering.document({"items": items}, output)
    if not items:
        return "no runs stored yet"
    lines = [rendering.runs_table(items, now or datetime.now(UTC), wide=output == "wide")]
    for item in items:
        job = f"{item['namespace']}/{item['name']}"
        about = f"{item['kind']}, attempt {item['attempt']}, uid {item['uid']}"
        lines += ["", f"== {job} ({about}) — {item['phase']}"]
        for pod in item["pods"]:
            slot = pod["replica"] or pod["role"]
            label = slot if pod["index"] is None else f"{slot}-{pod['index']}"
            lines.append(
                f"   pod {label:<10} {pod['phase']:<10} node={pod['node'] or '-':<14} "
                f"restarts={pod['restart_count']} {pod['reason'] or ''}".rstrip()
            )
        for finding in item["findings"]:
            status, rule = finding["status"].upper(), finding["rule"]
            lines.append(f"   >> {status:<8} {rule:<14} {finding['root_cause']}")
            if finding["status"] == "firing":
                lines += [f"      - {step}" for step in finding["remediation"]]
                lines.append(f"      see {finding['doc_anchor']}")
        lines += [f"   {rendering.when(entry['at'])}  {entry['summary']}" for entry in item["timeline"]]
    return "\n".join(lines)
