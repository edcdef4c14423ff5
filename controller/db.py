"""PostgreSQL schema of the history store, and the engine factory.

One row per run (job uid); attempts of the same job name are numbered and linked to the
previous attempt. Pod state history and the job timeline are append-only and keyed so
that replaying a stream inserts nothing new. The schema itself is built by Alembic
(``migrations/``); these models are what the migrations must match (``alembic check``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, DateTime, Index, Integer, String, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

JSON = dict[str, Any]


class Base(DeclarativeBase):
    type_annotation_map = {JSON: JSONB, list[Any]: JSONB, datetime: DateTime(timezone=True)}


class Run(Base):
    """One MPIJob/TrainJob object, identified by its uid."""

    __tablename__ = "runs"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    attempt: Mapped[int] = mapped_column(Integer, default=1)
    previous_uid: Mapped[str | None] = mapped_column(String(64))
    phase: Mapped[str] = mapped_column(String(16))
    resource_version: Mapped[int] = mapped_column(BigInteger)
    conditions: Mapped[list[Any]]
    spec: Mapped[JSON]
    labels: Mapped[JSON]
    created_at: Mapped[datetime]
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    deleted_at: Mapped[datetime | None]
    first_observed_at: Mapped[datetime]
    last_observed_at: Mapped[datetime]

    __table_args__ = (
        Index("ix_runs_ns_name_created", "namespace", "name", "created_at"),
        Index("ix_runs_created", "created_at"),
        Index("ix_runs_phase", "phase"),
    )


class Pod(Base):
    """Latest known state of one launcher or worker pod."""

    __tablename__ = "pods"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    role: Mapped[str] = mapped_column(String(16))
    index: Mapped[int | None]
    phase: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    node: Mapped[str | None] = mapped_column(String(253))
    resource_version: Mapped[int] = mapped_column(BigInteger)
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    containers: Mapped[list[Any]]
    resources: Mapped[JSON]
    created_at: Mapped[datetime]
    last_observed_at: Mapped[datetime]
    deleted_at: Mapped[datetime | None]


class PodState(Base):
    """Every observed version of a pod: the pod state history."""

    __tablename__ = "pod_states"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    pod_uid: Mapped[str] = mapped_column(String(64))
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    resource_version: Mapped[int] = mapped_column(BigInteger)
    phase: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    node: Mapped[str | None] = mapped_column(String(253))
    containers: Mapped[list[Any]]
    log_tail: Mapped[list[Any]]
    observed_at: Mapped[datetime]

    __table_args__ = (Index("uq_pod_states_pod_rv", "pod_uid", "resource_version", unique=True),)


class K8sEvent(Base):
    """Latest version of one Kubernetes Event about a run or its pods."""

    __tablename__ = "k8s_events"

    uid: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    reason: Mapped[str] = mapped_column(String(128))
    message: Mapped[str] = mapped_column(Text)
    event_type: Mapped[str] = mapped_column(String(16))
    involved_kind: Mapped[str] = mapped_column(String(64))
    involved_name: Mapped[str] = mapped_column(String(253))
    count: Mapped[int] = mapped_column(Integer)
    first_timestamp: Mapped[datetime | None]
    last_timestamp: Mapped[datetime | None]
    resource_version: Mapped[int] = mapped_column(BigInteger)


class TimelineEntry(Base):
    """One line of a run's timeline: a phase transition, a pod change or a Kubernetes event."""

    __tablename__ = "timeline"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    run_uid: Mapped[str] = mapped_column(String(64))
    at: Mapped[datetime]
    source: Mapped[str] = mapped_column(String(16))
    summary: Mapped[str] = mapped_column(Text)
    detail: Mapped[JSON]
    dedup_key: Mapped[str] = mapped_column(Text, unique=True)

    __table_args__ = (Index("ix_timeline_run_at", "run_uid", "at"),)


class FindingRow(Base):
    """Latest revision of one finding (one per run and rule)."""

    __tablename__ = "findings"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), index=True)
    namespace: Mapped[str] = mapped_column(String(253))
    job_name: Mapped[str] = mapped_column(String(253))
    rule: Mapped[str] = mapped_column(String(32), index=True)
    severity: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    root_cause: Mapped[str] = mapped_column(Text)
    evidence: Mapped[list[Any]]
    remediation: Mapped[list[Any]]
    doc_anchor: Mapped[str] = mapped_column(Text)
    revision: Mapped[int] = mapped_column(Integer)
    superseded_by: Mapped[str | None] = mapped_column(String(32))
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    resolved_at: Mapped[datetime | None]

    __table_args__ = (Index("ix_findings_ns_status", "namespace", "status"),)


def make_engine(url: str, pool_size: int = 5) -> AsyncEngine:
    """An asyncpg engine; ``postgresql://`` URLs are switched to the asyncpg driver."""
    return create_async_engine(async_url(url), pool_size=pool_size, pool_pre_ping=True)


def async_url(url: str) -> str:
    """``postgresql://…`` → ``postgresql+asyncpg://…`` (other drivers are replaced too)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme.startswith("postgres"):
        raise ValueError(f"not a PostgreSQL URL: {url!r}")
    return f"postgresql+asyncpg://{rest}"
