"""Read side of the history store, shared by the CLI and the API (never inline in handlers).

Lists page by keyset (``created_at``, ``uid``), newest first, so a page costs the same however
deep it is. Comparisons and trends are computed here from the stored rows — durations from
the run's timestamps, "all workers running" from the pod state history, failure causes from
the firing findings — so every reader tells the same story."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, false, func, select, text, tuple_
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncConnection

from controller.contract.events import TERMINAL_PHASES
from controller.contract.units import gib
from controller.store.filters import matching, within
from controller.store.models import (
    Base,
    FindingRow,
    K8sEventRow,
    PodRow,
    PodStateRow,
    PodUsageRow,
    Run,
    TimelineEntryRow,
)


@dataclass(frozen=True)
class RunFilter:
    """Filters of the runs list; ``None`` means any."""

    namespace: str | None = None
    name: str | None = None
    kind: str | None = None
    phase: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    labels: tuple[tuple[str, str], ...] = ()
    """``key=value`` pairs every run must carry."""
    namespaces: frozenset[str] | None = None
    """The namespaces the reader may see; ``None`` means all."""


def _filtered(query: Select[tuple[Run]], where: RunFilter) -> Select[tuple[Run]]:
    query = matching(
        query,
        (
            (Run.namespace, where.namespace),
            (Run.name, where.name),
            (Run.kind, where.kind),
            (Run.phase, where.phase),
        ),
    )
    query = within(query, Run.created_at, where.created_after, where.created_before)
    if where.labels:
        query = query.where(Run.labels.contains(dict(where.labels)))
    if where.namespaces is not None:
        query = query.where(Run.namespace.in_(sorted(where.namespaces)) if where.namespaces else false())
    return query


LISTED = tuple(c for c in Run.__table__.c if c.name != "manifest")
"""A run's columns but its manifest (up to 64 KiB, shown only on the run's own page)."""


async def list_runs(
    conn: AsyncConnection,
    where: RunFilter = RunFilter(),
    limit: int = 50,
    before: tuple[datetime, str] | None = None,
) -> Sequence[Run]:
    """Runs newest first; ``before`` is the (created_at, uid) cursor of the last row already seen."""
    query = _filtered(select(*LISTED), where)
    if before is not None:
        query = query.where(tuple_(Run.created_at, Run.uid) < tuple_(*before))
    rows = await conn.execute(query.order_by(Run.created_at.desc(), Run.uid.desc()).limit(limit))
    return [Run(**row._mapping) for row in rows]


async def get_run(conn: AsyncConnection, uid: str) -> Run | None:
    """One run by uid."""
    row = (await conn.execute(select(Run).where(Run.uid == uid))).first()
    return Run(**row._mapping) if row else None


_R = TypeVar("_R", bound=Base)


async def _of_run(conn: AsyncConnection, model: type[_R], uid: str, *order: Any) -> list[_R]:
    """The rows of ``model`` that belong to run ``uid``, in ``order``."""
    rows = await conn.execute(select(model).where(model.__table__.c.run_uid == uid).order_by(*order))
    return [model(**row._mapping) for row in rows]


async def run_pods(conn: AsyncConnection, uid: str) -> Sequence[PodRow]:
    """Pods of a run: launcher first, then workers by index."""
    return await _of_run(conn, PodRow, uid, PodRow.role, PodRow.replica, PodRow.index, PodRow.name)


async def run_timeline(conn: AsyncConnection, uid: str) -> Sequence[TimelineEntryRow]:
    """A run's timeline in time order."""
    return await _of_run(conn, TimelineEntryRow, uid, TimelineEntryRow.at, TimelineEntryRow.id)


async def run_events(conn: AsyncConnection, uid: str) -> Sequence[K8sEventRow]:
    """Kubernetes events about a run, oldest first."""
    return await _of_run(conn, K8sEventRow, uid, K8sEventRow.last_timestamp)


async def run_findings(conn: AsyncConnection, uid: str) -> Sequence[FindingRow]:
    """Findings of a run: firing first, then by when they were first seen."""
    return await _of_run(conn, FindingRow, uid, (FindingRow.status == "firing").desc(), FindingRow.first_seen)


async def newest_findings(conn: AsyncConnection, uids: Sequence[str]) -> dict[str, FindingRow]:
    """Each of ``uids``' newest finding, a firing one before any resolved (runs without: absent)."""
    if not uids:
        return {}
    rows = await conn.execute(
        select(FindingRow)
        .where(FindingRow.run_uid.in_(uids))
        .ext(distinct_on(FindingRow.run_uid))
        .order_by(FindingRow.run_uid, (FindingRow.status == "firing").desc(), FindingRow.last_seen.desc())
    )
    return {row.run_uid: FindingRow(**row._mapping) for row in rows}


async def run_pod_states(conn: AsyncConnection, uid: str) -> Sequence[PodStateRow]:
    """Every observed state of a run's pods, oldest first."""
    return await _of_run(conn, PodStateRow, uid, PodStateRow.observed_at, PodStateRow.resource_version)


async def run_usage(conn: AsyncConnection, uids: Sequence[str]) -> dict[str, list[PodUsageRow]]:
    """What the pods of each run used (launcher first, then workers by index); kept after the pods
    are deleted."""
    rows = await conn.execute(
        select(PodUsageRow)
        .where(PodUsageRow.run_uid.in_(list(uids)))
        .order_by(PodUsageRow.run_uid, PodUsageRow.role, PodUsageRow.index, PodUsageRow.name)
    )
    found: dict[str, list[PodUsageRow]] = {uid: [] for uid in uids}
    for row in rows:
        found[row.run_uid].append(PodUsageRow(**row._mapping))
    return found


def pod_slot(role: str, index: int | None, name: str) -> str:
    """``launcher``, ``worker-2``, or the pod's name when its index is unknown."""
    if role == "launcher":
        return "launcher"
    return f"worker-{index}" if index is not None else name


def memory_peak(usage: PodUsageRow) -> str | None:
    """``15.8 GiB of 16.0 GiB`` (or ``15.8 GiB, no limit``); ``None`` when no memory was read."""
    if usage.memory_max_bytes is None:
        return None
    if usage.memory_limit_bytes:
        return f"{gib(usage.memory_max_bytes)} of {gib(usage.memory_limit_bytes)}"
    return f"{gib(usage.memory_max_bytes)}, no limit"


def gpu_util_mean(usage: PodUsageRow) -> float | None:
    """Mean utilization over the pod's GPUs (%), ``None`` without GPU figures."""
    means = [g["util_mean_pct"] for g in usage.gpus or () if g.get("util_mean_pct") is not None]
    return round(sum(means) / len(means), 2) if means else None


@dataclass(frozen=True)
class UsageLineRecord:
    """One launcher or worker slot across the compared runs: its peak memory in each, in words."""

    slot: str
    runs: tuple[str, ...]
    """How each run is named: ``attempt 1``, or its uid when the runs are of several job names."""
    peaks: tuple[str | None, ...]
    gpu_util_mean_pct: tuple[float | None, ...]

    @property
    def sentence(self) -> str:
        """``worker-2: attempt 1 peaked at 15.8 GiB of 16.0 GiB; attempt 2 at 17.1 GiB of 32.0 GiB``."""
        parts: list[str] = []
        for label, peak in zip(self.runs, self.peaks, strict=True):
            if peak is None:
                parts.append(f"{label}: not read")
            else:
                parts.append(f"{label} {'peaked at' if not parts else 'at'} {peak}")
        return f"{self.slot}: " + "; ".join(parts)


def usage_lines(runs: Sequence[Run], usage: dict[str, list[PodUsageRow]]) -> tuple[UsageLineRecord, ...]:
    """Slot by slot (launcher, then workers by index), what each of ``runs`` used; none when no run
    has figures."""
    by_slot: dict[tuple[int, int, str], dict[str, PodUsageRow]] = {}
    for run in runs:
        for row in usage.get(run.uid, ()):
            order = (0 if row.role == "launcher" else 1, row.index if row.index is not None else -1, row.name)
            key = (order[0], order[1], pod_slot(row.role, row.index, row.name))
            by_slot.setdefault(key, {})[run.uid] = row
    one_job = len({(r.namespace, r.kind, r.name) for r in runs}) == 1
    labels = tuple(f"attempt {r.attempt}" if one_job else r.uid for r in runs)
    lines: list[UsageLineRecord] = []
    for (_, _, slot), rows in sorted(by_slot.items()):
        peaks = tuple(memory_peak(rows[r.uid]) if r.uid in rows else None for r in runs)
        utils = tuple(gpu_util_mean(rows[r.uid]) if r.uid in rows else None for r in runs)
        lines.append(UsageLineRecord(slot, labels, peaks, utils))
    return tuple(lines)


async def get_runs(conn: AsyncConnection, uids: Sequence[str]) -> dict[str, Run]:
    """Runs by uid; uids that match no run are absent."""
    rows = await conn.execute(select(Run).where(Run.uid.in_(list(uids))))
    return {row.uid: Run(**row._mapping) for row in rows}


async def run_namespaces(conn: AsyncConnection) -> list[str]:
    """Every namespace that has runs, in order: a skip scan over the (namespace, …) index.

    A plain ``SELECT DISTINCT`` reads every row; walking the index from one namespace to the
    next reads one index entry per namespace.
    """
    rows = await conn.execute(
        text(
            """
            WITH RECURSIVE ns(namespace) AS (
                (SELECT namespace FROM runs ORDER BY namespace LIMIT 1)
                UNION ALL
                SELECT (SELECT r.namespace FROM runs r WHERE r.namespace > ns.namespace
                        ORDER BY r.namespace LIMIT 1)
                FROM ns WHERE ns.namespace IS NOT NULL
            )
            SELECT namespace FROM ns WHERE namespace IS NOT NULL
            """
        )
    )
    return [row.namespace for row in rows]


# -- durations, comparison and trends ------------------------------------------------------------


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if start is not None and end is not None else None


@dataclass(frozen=True)
class DurationsRecord:
    """Where a run's time went, in seconds; ``None`` where the run has not got that far."""

    queued_s: float | None
    """Created → started (waiting for the scheduler, quota, or a suspend to lift)."""
    to_all_workers_running_s: float | None
    """Created → the last worker pod seen Running (the MPI mesh could form from then on)."""
    running_s: float | None
    """Started → finished."""
    total_s: float | None
    """Created → finished."""

    @classmethod
    def of(cls, run: Run, all_workers_running_at: datetime | None = None) -> DurationsRecord:
        return cls(
            queued_s=_seconds(run.created_at, run.started_at),
            to_all_workers_running_s=_seconds(run.created_at, all_workers_running_at),
            running_s=_seconds(run.started_at, run.finished_at),
            total_s=_seconds(run.created_at, run.finished_at),
        )


@dataclass(frozen=True)
class TerminationRecord:
    """One container termination, as the pod states recorded it."""

    container: str
    reason: str | None
    exit_code: int | None
    signal: int | None
    at: datetime | None


@dataclass(frozen=True)
class PodSummaryRecord:
    """One launcher or worker of a compared run: where it ran, how often it restarted and died."""

    role: str
    replica: str | None
    index: int | None
    name: str
    phase: str
    node: str | None
    restarts: int
    running_at: datetime | None
    terminations: tuple[TerminationRecord, ...]


@dataclass(frozen=True)
class ComparedRunRecord:
    """One column of a comparison."""

    run: Run
    durations: DurationsRecord
    failure_causes: tuple[FindingRow, ...]
    pods: tuple[PodSummaryRecord, ...]


@dataclass(frozen=True)
class SpecFieldRecord:
    """One spec field across the compared runs (``None``: not recorded for that run)."""

    path: str
    values: tuple[Any, ...]

    @property
    def differs(self) -> bool:
        return any(value != self.values[0] for value in self.values[1:])


@dataclass(frozen=True)
class ComparisonRecord:
    """Runs side by side: their spec fields, and each run's durations, outcome and pods."""

    runs: tuple[ComparedRunRecord, ...]
    spec: tuple[SpecFieldRecord, ...]
    usage: tuple[UsageLineRecord, ...] = ()


_SPEC_ORDER = (
    "workers",
    "slots_per_worker",
    "mpi_implementation",
    "runtime",
    "suspend",
    "launcher",
    "worker",
    "replicas",
    "image",
    "command",
    "resources",
    "requests",
    "limits",
)


def _flatten(value: Any, at: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """``{"worker": {"image": "x"}}`` → ``{("worker", "image"): "x"}``; lists stay values."""
    if not isinstance(value, dict):
        return {at: value}
    flat: dict[tuple[str, ...], Any] = {}
    for key, item in value.items():
        flat.update(_flatten(item, (*at, str(key))))
    return flat


def _path(parts: tuple[str, ...]) -> str:
    """Dotted, with keys that hold dots in brackets: ``worker.resources.limits["nvidia.com/gpu"]``."""
    return "".join(
        f'["{part}"]' if "." in part else f".{part}" if i else part for i, part in enumerate(parts)
    )


def _spec_rank(parts: tuple[str, ...]) -> tuple[tuple[int, str], ...]:
    return tuple((_SPEC_ORDER.index(p) if p in _SPEC_ORDER else len(_SPEC_ORDER), p) for p in parts)


def spec_fields(specs: Sequence[dict[str, Any]]) -> tuple[SpecFieldRecord, ...]:
    """Every field of the given specs, in a reading order, with each spec's value."""
    flat = [_flatten(spec) for spec in specs]
    paths = sorted({parts for spec in flat for parts in spec if parts}, key=_spec_rank)
    return tuple(SpecFieldRecord(_path(parts), tuple(spec.get(parts) for spec in flat)) for parts in paths)


def _parse_time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _terminations(states: Sequence[Any]) -> tuple[TerminationRecord, ...]:
    """Container terminations found in a pod's states, one per (container, restart), in time order."""
    seen: dict[tuple[str, int], TerminationRecord] = {}
    for state in states:
        for c in state.containers:
            name, restarts = str(c.get("name", "")), int(c.get("restart_count", 0))
            if c.get("last_reason") or c.get("last_exit_code") is not None:
                seen.setdefault(
                    (name, restarts - 1),
                    TerminationRecord(
                        name,
                        c.get("last_reason"),
                        c.get("last_exit_code"),
                        None,
                        _parse_time(c.get("last_finished_at")),
                    ),
                )
            if c.get("state") == "terminated":
                seen[(name, restarts)] = TerminationRecord(
                    name,
                    c.get("reason"),
                    c.get("exit_code"),
                    c.get("signal"),
                    _parse_time(c.get("finished_at")) or state.observed_at,
                )
    return tuple(sorted(seen.values(), key=lambda t: (t.at is None, t.at or datetime.min, t.container)))


async def _pod_summaries(conn: AsyncConnection, uids: Sequence[str]) -> dict[str, list[PodSummaryRecord]]:
    rows = await conn.execute(
        select(PodRow)
        .where(PodRow.run_uid.in_(list(uids)))
        .order_by(PodRow.role, PodRow.replica, PodRow.index, PodRow.name)
    )
    pods = [PodRow(**row._mapping) for row in rows]
    states = await conn.execute(
        select(PodStateRow.pod_uid, PodStateRow.phase, PodStateRow.containers, PodStateRow.observed_at)
        .where(PodStateRow.run_uid.in_(list(uids)))
        .order_by(PodStateRow.observed_at, PodStateRow.resource_version)
    )
    by_pod: dict[str, list[Any]] = {}
    for state in states:
        by_pod.setdefault(state.pod_uid, []).append(state)
    summaries: dict[str, list[PodSummaryRecord]] = {uid: [] for uid in uids}
    for pod in pods:
        history = by_pod.get(pod.uid, [])
        summaries[pod.run_uid].append(
            PodSummaryRecord(
                role=pod.role,
                replica=pod.replica,
                index=pod.index,
                name=pod.name,
                phase=pod.phase,
                node=pod.node,
                restarts=pod.restart_count,
                running_at=next((s.observed_at for s in history if s.phase == "Running"), None),
                terminations=_terminations(history),
            )
        )
    return summaries


def _all_workers_running_at(run: Run, pods: Sequence[PodSummaryRecord]) -> datetime | None:
    """When the last expected worker was first seen Running, or None if some never was."""
    workers = [p for p in pods if p.role == "worker"]
    expected = max(int(run.spec.get("workers") or 0), len(workers))
    started = [p.running_at for p in workers if p.running_at is not None]
    return max(started) if workers and len(started) >= expected else None


async def compare_runs(conn: AsyncConnection, uids: Sequence[str]) -> ComparisonRecord:
    """The given runs side by side (every uid must exist: check with :func:`get_runs` first)."""
    runs = await get_runs(conn, uids)
    pods = await _pod_summaries(conn, uids)
    findings = await conn.execute(
        select(FindingRow)
        .where(FindingRow.run_uid.in_(list(uids)), FindingRow.status == "firing")
        .order_by(FindingRow.first_seen, FindingRow.rule)
    )
    causes: dict[str, list[FindingRow]] = {}
    for row in findings:
        causes.setdefault(row.run_uid, []).append(FindingRow(**row._mapping))
    compared = tuple(
        ComparedRunRecord(
            run=runs[uid],
            durations=DurationsRecord.of(runs[uid], _all_workers_running_at(runs[uid], pods[uid])),
            failure_causes=tuple(causes.get(uid, ())),
            pods=tuple(pods[uid]),
        )
        for uid in uids
    )
    usage = usage_lines([runs[uid] for uid in uids], await run_usage(conn, uids))
    return ComparisonRecord(compared, spec_fields([runs[uid].spec for uid in uids]), usage)


@dataclass(frozen=True)
class TrendPointRecord:
    """One run of a job's history."""

    run: Run
    durations: DurationsRecord
    memory_peak_ratio: float | None = None
    """The highest working set of any of its pods over that pod's memory limit."""
    gpu_util_mean_pct: float | None = None
    """Mean GPU utilization over its workers' GPUs."""


@dataclass(frozen=True)
class TrendRecord:
    """How one job name has done over its last runs, oldest first."""

    points: tuple[TrendPointRecord, ...]

    @property
    def finished(self) -> int:
        return sum(1 for p in self.points if p.run.phase in TERMINAL_PHASES)

    @property
    def failed(self) -> int:
        return sum(1 for p in self.points if p.run.phase == "Failed")

    @property
    def failure_rate(self) -> float | None:
        """Failed / finished; ``None`` while none has finished."""
        return self.failed / self.finished if self.finished else None

    def totals(self) -> list[float]:
        """Created → finished of every finished run, sorted."""
        return sorted(
            p.durations.total_s
            for p in self.points
            if p.durations.total_s is not None and p.run.phase in TERMINAL_PHASES
        )


async def job_trend(
    conn: AsyncConnection, namespace: str, name: str, last: int, kind: str | None = None
) -> TrendRecord:
    """The last ``last`` runs of one job name (of one ``kind``, else any), oldest first, with
    their durations and what their pods used."""
    runs = await list_runs(conn, RunFilter(namespace=namespace, name=name, kind=kind), limit=last)
    usage = await run_usage(conn, [run.uid for run in runs])
    return TrendRecord(tuple(_trend_point(run, usage[run.uid]) for run in reversed(runs)))


def _trend_point(run: Run, usage: Sequence[PodUsageRow]) -> TrendPointRecord:
    ratios = [
        u.memory_max_bytes / u.memory_limit_bytes
        for u in usage
        if u.memory_max_bytes and u.memory_limit_bytes
    ]
    utils = [m for u in usage if u.role == "worker" and (m := gpu_util_mean(u)) is not None]
    return TrendPointRecord(
        run,
        DurationsRecord.of(run),
        memory_peak_ratio=round(max(ratios), 4) if ratios else None,
        gpu_util_mean_pct=round(sum(utils) / len(utils), 2) if utils else None,
    )


# -- aggregates behind /metrics ------------------------------------------------------------------


async def jobs_by_phase(conn: AsyncConnection) -> list[tuple[str, str, str, int]]:
    """(namespace, kind, phase, count) of the runs not deleted yet."""
    rows = await conn.execute(
        select(Run.namespace, Run.kind, Run.phase, func.count())
        .where(Run.deleted_at.is_(None))
        .group_by(Run.namespace, Run.kind, Run.phase)
    )
    return [(row[0], row[1], row[2], int(row[3])) for row in rows]


async def run_duration_histogram(
    conn: AsyncConnection, buckets: Sequence[float]
) -> list[tuple[str, str, list[int], int, float]]:
    """Finished runs by (kind, outcome): cumulative counts ≤ each bucket, count and sum of seconds."""
    seconds = func.extract("epoch", Run.finished_at - Run.created_at)
    columns = [func.count().filter(seconds <= bound) for bound in buckets]
    rows = await conn.execute(
        select(Run.kind, Run.phase, func.count(), func.coalesce(func.sum(seconds), 0), *columns)
        .where(Run.finished_at.is_not(None), Run.phase.in_(sorted(TERMINAL_PHASES)))
        .group_by(Run.kind, Run.phase)
    )
    return [(row[0], row[1], [int(c) for c in row[4:]], int(row[2]), float(row[3])) for row in rows]


async def findings_by_rule(conn: AsyncConnection) -> list[tuple[str, str, str, int]]:
    """(rule, severity, status, count) of the stored findings."""
    rows = await conn.execute(
        select(FindingRow.rule, FindingRow.severity, FindingRow.status, func.count()).group_by(
            FindingRow.rule, FindingRow.severity, FindingRow.status
        )
    )
    return [(row[0], row[1], row[2], int(row[3])) for row in rows]
