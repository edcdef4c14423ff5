"""Runs in the history store and an API client over them, for the API tests.

Two ways in: whole job stories written through the real write side (correlator →
:func:`controller.store.history.apply_events`, findings through ``apply_findings``), for detail,
timeline and comparison; and plain run rows, for list filters, pagination and authorization
across many namespaces.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from controller.api.access import AccessReviewer, Principal, StaticAccess
from controller.api.app import create_app
from controller.contract.events import JobRef, PodUsage, UsageObserved
from controller.contract.findings import Evidence, Finding, RuleId, doc_anchor, finding_id
from controller.contract.findings import dedup_key as finding_key
from controller.contract.settings import StaticUser
from controller.metrics import PipelineMetrics
from controller.store.history import apply_events, apply_findings
from controller.store.models import PodRow, Run
from controller.testing import objects as k
from watchers.correlating import Correlator, Observation

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)

USERS = {
    "token-admin": StaticUser(username="admin", namespaces=["*"], manage=["*"]),
    "token-alice": StaticUser(username="alice", groups=["team-a"], namespaces=["team-a"], manage=["team-a"]),
    "token-bob": StaticUser(username="bob", groups=["team-b"], namespaces=["team-b", "shared"]),
    "token-nobody": StaticUser(username="nobody"),
}


class CountingAccess(StaticAccess):
    """The static tokens, counting every token review asked for."""

    def __init__(self) -> None:
        super().__init__(USERS)
        self.reviews = 0

    async def review_token(self, token: str) -> Principal | None:
        self.reviews += 1
        return await super().review_token(token)


"""Static tokens of the tests: admin sees and manages everything, alice team-a; bob reads team-b
and shared (read-only)."""


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


ADMIN = bearer("token-admin")


def _iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


def job_story(
    name: str,
    *,
    namespace: str = "team-a",
    workers: int = 2,
    memory: str = "16Gi",
    start: datetime = T0,
    outcome: str = "Succeeded",
    oom_worker: int | None = None,
    restarts: int = 0,
) -> tuple[str, list[Observation]]:
    """A whole MPIJob from creation to ``outcome`` (worker ``oom_worker`` OOM-killed); its uid and story.

    Pods are created at +2 s, workers are seen Running at +20 s plus 5 s per index, the job runs
    from +30 s and finishes at +600 s.
    """

    def at(seconds: int) -> datetime:
        return start + timedelta(seconds=seconds)

    job = k.mpijob(name, namespace, workers, created=_iso(start), memory=memory)
    job["metadata"]["labels"] = {"team": namespace, "exp": name}
    obs = [Observation("job", "ADDED", job, at(0))]
    pods = [k.pod(job, "launcher", node="cpu-1", created=_iso(at(2)))] + [
        k.pod(job, "worker", i, node=f"gpu-{i}", created=_iso(at(2))) for i in range(workers)
    ]
    obs += [Observation("pod", "ADDED", p, at(2)) for p in pods]
    running = []
    for i, pod in enumerate(pods):
        seen = at(20 + 5 * max(0, i - 1))
        state = {"running": {"startedAt": _iso(seen)}}
        running.append(k.with_container_state(pod, state, phase="Running", ready=True, restarts=restarts))
        obs.append(Observation("pod", "MODIFIED", running[-1], seen))
    job = k.with_conditions(job, ("Running", "MPIJobRunning", _iso(at(30))))
    obs.append(Observation("job", "MODIFIED", job, at(30)))
    if oom_worker is not None:
        killed = {
            "exitCode": 137,
            "reason": "OOMKilled",
            "startedAt": _iso(at(20)),
            "finishedAt": _iso(at(590)),
        }
        victim = k.with_container_state(running[oom_worker + 1], {"terminated": killed}, phase="Failed")
        obs.append(Observation("pod", "MODIFIED", victim, at(590), ("Killed",)))
    job = k.with_conditions(job, (outcome, f"MPIJob{outcome}", _iso(at(600))))
    obs.append(Observation("job", "MODIFIED", job, at(600)))
    return job["metadata"]["uid"], obs


async def store(engine: AsyncEngine, observations: Iterable[Observation]) -> None:
    """Write observations the way the history consumer would."""
    correlator = Correlator(30, lambda: 0.0)
    events = [event for o in observations for event in correlator.observe(o)]
    async with engine.begin() as conn:
        await apply_events(conn, events)


async def fire(
    engine: AsyncEngine,
    uid: str,
    namespace: str,
    name: str,
    rule: RuleId,
    root_cause: str,
    at: datetime,
    revision: int = 1,
) -> None:
    """Store a firing finding of ``rule`` on a run (its ``revision``)."""
    finding = Finding(
        id=finding_id(uid, rule),
        rule=rule,
        severity="critical",
        status="firing",
        job=JobRef(uid=uid, kind="MPIJob", namespace=namespace, name=name),
        root_cause=root_cause,
        evidence=(Evidence(source="pod/x", field="reason", value="OOMKilled"),),
        remediation=("Increase worker memory.",),
        doc_anchor=doc_anchor(rule),
        dedup_key=finding_key(uid, rule),
        first_seen=at,
        last_seen=at,
        revision=revision,
    )
    async with engine.begin() as conn:
        await apply_findings(conn, [finding])


async def oom_failed(engine: AsyncEngine, root_cause: str) -> str:
    """``team-a/train`` stored failed, worker 1 OOM-killed, its ``oom`` finding firing at the end
    saying ``root_cause``: the run's uid."""
    uid, story = job_story("train", outcome="Failed", oom_worker=1)
    await store(engine, story)
    await fire(engine, uid, "team-a", "train", "oom", root_cause, T0 + timedelta(seconds=600))
    return uid


def run_row(
    namespace: str,
    name: str,
    created: datetime,
    *,
    kind: str = "MPIJob",
    phase: str = "Succeeded",
    labels: dict[str, str] | None = None,
    attempt: int = 1,
    uid: str | None = None,
) -> dict[str, Any]:
    """A plain ``runs`` row: started 30 s and (if terminal) finished 600 s after creation."""
    terminal = phase in {"Succeeded", "Failed"}
    return {
        "uid": uid or str(uuid.uuid4()),
        "kind": kind,
        "namespace": namespace,
        "name": name,
        "attempt": attempt,
        "previous_uid": None,
        "phase": phase,
        "resource_version": 1,
        "conditions": [],
        "spec": {"workers": 2, "slots_per_worker": 8},
        "labels": labels or {},
        "created_at": created,
        "started_at": created + timedelta(seconds=30) if phase != "Pending" else None,
        "finished_at": created + timedelta(seconds=600) if terminal else None,
        "deleted_at": None,
        "first_observed_at": created,
        "last_observed_at": created,
    }


async def insert_runs(engine: AsyncEngine, rows: Sequence[dict[str, Any]]) -> None:
    async with engine.begin() as conn:
        await conn.execute(insert(Run), list(rows))


@pytest.fixture
def reviewer() -> AccessReviewer:
    """The static tokens of :data:`USERS`; a test overrides this fixture for other modes."""
    return StaticAccess(USERS)


@pytest.fixture
async def api(engine: AsyncEngine, reviewer: AccessReviewer) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client of the API app over this test's database, in process."""
    app = create_app(engine, PipelineMetrics(), reviewer, metrics_ttl_s=0)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client


async def store_worker_usage(
    engine: AsyncEngine,
    run_uid: str,
    job_name: str,
    observed_at: datetime,
    figures: Callable[[PodRow], dict[str, Any]],
) -> None:
    """A usage reading of each worker of run ``run_uid`` (MPIJob ``team-a/<job_name>``), as the
    watcher publishes it: ``figures`` of each worker's stored pod."""
    async with engine.begin() as conn:
        pods = [
            p
            for p in (await conn.execute(select(PodRow).where(PodRow.run_uid == run_uid)))
            if p.role == "worker"
        ]
        usage = tuple(
            PodUsage(uid=p.uid, name=p.name, role="worker", index=p.index, **figures(p)) for p in pods
        )
        ref = JobRef(uid=run_uid, kind="MPIJob", namespace="team-a", name=job_name)
        reading = UsageObserved(
            job=ref, uid=run_uid, resource_version="1", pods=usage, observed_at=observed_at
        )
        await apply_events(conn, [reading])
