"""Plain-text reports of the history store for the terminal (``history``, ``demo``)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from controller.store import queries


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _duration(start: datetime | None, end: datetime | None) -> str:
    if not start or not end:
        return "-"
    seconds = int((end - start).total_seconds())
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m{seconds % 60:02d}s"


async def history(
    conn: AsyncConnection,
    namespace: str | None = None,
    name: str | None = None,
    limit: int = 20,
    kind: str | None = None,
) -> str:
    """Runs table (of one ``kind``, if given) followed by each run's pods and timeline."""
    where = queries.RunFilter(namespace=namespace, name=name, kind=kind)
    runs = await queries.list_runs(conn, where, limit=limit)
    if not runs:
        return "no runs stored yet"
    lines = [
        f"{'RUN':<40} {'KIND':<10} {'ATTEMPT':>7} {'PHASE':<10} {'CREATED':<19} {'RAN FOR':>10}",
        "-" * 100,
    ]
    lines += [
        f"{r.namespace + '/' + r.name:<40} {r.kind:<10} {r.attempt:>7} {r.phase:<10} "
        f"{_when(r.created_at):<19} {_duration(r.started_at, r.finished_at):>10}"
        for r in runs
    ]
    for run in runs:
        lines += ["", f"== {run.namespace}/{run.name} ({run.kind}, uid {run.uid}) — {run.phase}"]
        for pod in await queries.run_pods(conn, run.uid):
            slot = pod.replica or pod.role
            label = slot if pod.index is None else f"{slot}-{pod.index}"
            lines.append(
                f"   pod {label:<10} {pod.phase:<10} node={pod.node or '-':<14} "
                f"restarts={pod.restart_count} {pod.reason or ''}".rstrip()
            )
        for finding in await queries.run_findings(conn, run.uid):
            lines.append(f"   >> {finding.status.upper():<8} {finding.rule:<14} {finding.root_cause}")
            if finding.status == "firing":
                lines += [f"      - {step}" for step in finding.remediation]
                lines.append(f"      see {finding.doc_anchor}")
        for entry in await queries.run_timeline(conn, run.uid):
            lines.append(f"   {_when(entry.at)}  {entry.summary}")
    return "\n".join(lines)
