"""What a round of judging admission records costs the audit consumer, over a long chain.

``python -m benchmarks.corroboration [--judged 500000] [--waiting 1000]``: an embedded PostgreSQL
(migrated) holding ``--judged`` admission records that already have a verdict and ``--waiting``
records that do not (each an update of its own MPIJob, with two watched versions: the one before
and a scale). Measured, as ``consumers.audit.consumer.run_corroboration`` runs it:

- a round that looks at the whole chain (the first round after a start: ``after=0``);
- a steady round, from the seq every earlier record is judged up to (``settled``), with nothing
  new and with ``--waiting`` records to judge (they are all borne out).

Prints one JSON document (``benchmarks/results/corroboration.json``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import text

from benchmarks.harness import pipeline_services, report
from controller.contract.events import JobObserved, JobSpecSummary, RoleSpec
from controller.store import corroboration

WINDOW = timedelta(minutes=2)
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)

_RECORDS = """
INSERT INTO audit_records (seq, event_id, recorded_at, record, prev_hash, hash, at, namespace, source,
                           verb, kind, name, object_uid, username)
SELECT g, 'admission/' || g, :now, jsonb_build_object(
    'schema_version', 1, 'type', 'audit', 'id', 'admission/' || g, 'source', 'admission', 'verb', 'update',
    'at', CAST(:at AS text), 'namespace', 'team-a', 'caller', 'unverified',
    'changes', jsonb_build_array(CAST(:path AS text)),
    'actor', jsonb_build_object('username', 'alice'),
    'object', jsonb_build_object('api_group', 'kubeflow.org', 'api_version', 'v2beta1', 'kind', 'MPIJob',
                                 'name', 'job-' || g, 'uid', 'uid-' || g)),
    repeat('0', 64), repeat('0', 64), :now, 'team-a', 'admission', 'update', 'MPIJob', 'job-' || g,
    'uid-' || g, 'alice'
FROM generate_series(CAST(:first AS bigint), CAST(:last AS bigint)) g
"""


def _version(n: int, rv: int, workers: int, generation: int, at: datetime) -> JobObserved:
    spec = JobSpecSummary(workers=workers, worker=RoleSpec(replicas=workers))
    return JobObserved(
        change="MODIFIED",
        uid=f"uid-{n}",
        kind="MPIJob",
        namespace="team-a",
        name=f"job-{n}",
        resource_version=str(rv),
        generation=generation,
        phase="Running",
        spec=spec,
        created_at=at - timedelta(hours=1),
        observed_at=at,
    )


async def _round(engine: Any, after: int) -> tuple[float, int, int]:
    started = time.perf_counter()
    async with engine.begin() as conn:
        decided = await corroboration.decide(conn, NOW, WINDOW, after=after)
        await corroboration.pending(conn, after)
        settled = await corroboration.settled(conn, after)
    return time.perf_counter() - started, len(decided), settled


async def run(judged: int, waiting: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mpijc-bench-") as data:
        async with pipeline_services(Path(data), consumers=()) as bench:
            engine = bench.engine
            path = "spec.mpiReplicaSpecs.Worker.replicas"
            async with engine.begin() as conn:
                long_ago = {
                    "now": NOW - timedelta(days=2),
                    "at": (NOW - timedelta(days=2)).isoformat(),
                    "path": path,
                }
                await conn.execute(text(_RECORDS), {**long_ago, "first": 1, "last": judged})
                await conn.execute(
                    text(
                        "INSERT INTO admission_corroborations (audit_seq, status, decided_at) "
                        "SELECT g, 'verified', :now FROM generate_series(1, :last) g"
                    ),
                    {"now": NOW - timedelta(days=2), "last": judged},
                )
            async with engine.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.exec_driver_sql("ANALYZE")
            full = [(await _round(engine, 0))[0] for _ in range(rounds)]
            settled = judged
            idle = [(await _round(engine, settled))[0] for _ in range(rounds)]

            first, last = judged + 1, judged + waiting
            recent = {
                "now": NOW - timedelta(seconds=5),
                "at": (NOW - timedelta(seconds=5)).isoformat(),
                "path": path,
            }
            async with engine.begin() as conn:
                await conn.execute(text(_RECORDS), {**recent, "first": first, "last": last})
                versions = [
                    v
                    for n in range(first, last + 1)
                    for v in (
                        _version(n, 2 * n, 4, 1, NOW - timedelta(hours=1)),
                        _version(n, 2 * n + 1, 64, 2, NOW - timedelta(seconds=4)),
                    )
                ]
                await corroboration.record_changes(conn, versions)
            busy, decided, settled = await _round(engine, settled)
            return {
                "judged_records": judged,
                "waiting_records": waiting,
                "round_whole_chain_s": {"median": statistics.median(full), "all": full},
                "round_from_settled_nothing_new_s": {"median": statistics.median(idle), "all": idle},
                "round_judging_waiting_s": busy,
                "verdicts_in_that_round": decided,
                "settled_after_it": settled,
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judged", type=int, default=500_000)
    parser.add_argument("--waiting", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    report("corroboration", asyncio.run(run(args.judged, args.waiting, args.rounds)))


if __name__ == "__main__":
    main()
