"""The rules engine's state, kept in a JetStream key-value bucket so a restart costs nothing.

Bucket ``RULES_STATE`` (:meth:`Topology.bucket`), one key per run and a few per partition:

- ``p<partition>.run.<job uid>``: the run's :class:`RunState`, its firing findings, the keys
  that deduplicate them and its **revision counters** (so a takeover numbers the next change
  of a finding as the previous owner would have: same ``Nats-Msg-Id``, dropped as a duplicate
  if it was already published);
- ``p<partition>.meta``: the JOBS stream sequence the snapshot covers (every event of the
  partition up to it is folded in), the FINDINGS stream sequence up to which its findings are
  the bus's, and the newest event time (the event clock);
- ``p<partition>.tombstones``: the last forgotten finished runs (their late events stay ignored).

The consumer writes the runs a batch or tick changed, then the meta key, only once every
finding those changes produced is acknowledged by JetStream (the outbox is empty): a snapshot
never holds a change the bus lacks. Restoring loads the keys of one partition; the warm start
then replays only the JOBS messages after the meta's sequence, and compares with only the
FINDINGS messages after its findings sequence. A forgotten run's key is purged, not deleted
(:func:`controller.bus.buckets.forget`): a delete marker would be read by every later start,
so the load would grow with every run the partition ever finished.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Required, cast

from pydantic import TypeAdapter, ValidationError
from pydantic_core import to_json
from typing_extensions import TypedDict

from consumers.rules.engine import HeldRun, RuleEngine
from consumers.rules.stateformat import RunStateData, run_state_from_data, run_state_to_dict
from controller.bus.buckets import forget
from controller.bus.client import JetStreamContext, KeyValue, NatsError
from controller.bus.keyspace import has_key, read_prefix, write
from controller.bus.keyspace import state_bucket as open_state_bucket
from controller.contract.findings import Finding, RuleId
from controller.contract.phases import Phases
from controller.contract.subjects import Topology
from controller.contract.turns import Turns

log = logging.getLogger(__name__)

STATE_BUCKET = "rules-state"
SNAPSHOT_FORMAT = 1
MAX_TOMBSTONES = 2000
"""Forgotten finished runs remembered in a snapshot (their late events stay ignored)."""


@dataclass(frozen=True)
class Snapshot:
    """What a partition's snapshot said when it was loaded."""

    sequence: int
    runs: int
    newest: datetime | None
    findings_sequence: int = 0
    """FINDINGS stream sequence up to which the runs agree with the bus (0: unknown, read it all)."""


def _run_to_json(run: HeldRun) -> bytes:
    return to_json(
        {
            "format": SNAPSHOT_FORMAT,
            "state": run_state_to_dict(run.state),
            "touched_at": run.touched_at.isoformat(),
            "firing": {rule: f.model_dump(mode="json") for rule, f in run.firing.items()},
            "keys": {rule: list(key) for rule, key in run.keys.items()},
            "revisions": dict(run.revisions),
            "tentative": sorted(run.tentative),
            "live_only": sorted(run.live_only),
        },
    )


class _RunData(TypedDict, total=False):
    """A run's key as :func:`_run_to_json` writes it."""

    state: Required[RunStateData]
    touched_at: Required[str]
    firing: dict[str, Finding]
    keys: dict[str, list[str]]
    revisions: dict[str, int]
    tentative: list[str]
    live_only: list[str]


_RUN_DATA: TypeAdapter[_RunData] = TypeAdapter(_RunData)
"""Reads a run's key from its JSON in one pass, every bus event and finding in it validated (a
key read into dicts first and validated model by model took twice the time: the larger part of a
warm start's load)."""


def _run_from_json(payload: bytes) -> HeldRun:
    """The run :func:`_run_to_json` wrote; ``ValueError`` if the payload is not one."""
    try:
        data = _RUN_DATA.validate_json(payload)
    except ValidationError as exc:
        raise ValueError(str(exc)) from None
    return HeldRun(
        state=run_state_from_data(data["state"]),
        touched_at=datetime.fromisoformat(data["touched_at"]),
        firing=cast(dict[RuleId, Finding], data.get("firing", {})),
        keys={cast(RuleId, rule): tuple(key) for rule, key in data.get("keys", {}).items()},
        revisions=cast(dict[RuleId, int], data.get("revisions", {})),
        tentative=cast(set[RuleId], set(data.get("tentative", ()))),
        live_only=cast(set[RuleId], set(data.get("live_only", ()))),
    )


async def state_bucket(js: JetStreamContext, topology: Topology, replicas: int = 1) -> KeyValue:
    """The snapshot bucket, created on first use (file storage, one value per key)."""
    return await open_state_bucket(js, topology.bucket(STATE_BUCKET), replicas, "rules snapshots")


class SnapshotStore:
    """Reads and writes the snapshot of one partition of the rules engine."""

    def __init__(self, kv: KeyValue, partition: int) -> None:
        self._kv = kv
        self._prefix = f"p{partition}"
        self._saved: set[str] = set()
        self._tombstones: tuple[str, ...] = ()

    def _run_key(self, uid: str) -> str:
        return f"{self._prefix}.run.{uid}"

    async def load(self, engine: RuleEngine, phases: Phases | None = None) -> Snapshot:
        """Fill an empty ``engine`` with the partition's runs; returns what the snapshot covers.
        ``phases``: the read and the restore are marked there."""
        phases = phases if phases is not None else Phases()
        runs: list[tuple[str, HeldRun]] = []
        meta: dict[str, Any] = {}
        tombstones: tuple[str, ...] = ()
        # without a meta key there is no snapshot to load (it is written last), and no watch
        # whose end of an empty partition takes a wait
        if not await has_key(self._kv, f"{self._prefix}.meta"):
            phases.mark("snapshot meta")
            return Snapshot(0, 0, None)
        phases.mark("snapshot meta")
        read = await read_prefix(self._kv, self._prefix)
        phases.mark("snapshot read")
        markers = read.markers  # deleted keys of earlier versions, which left markers
        turns = Turns()  # hundreds of runs, a millisecond or more each: the leases renewed between
        for key, value in read.values:
            await turns.take()
            if key == f"{self._prefix}.meta":
                meta = json.loads(value)
            elif key == f"{self._prefix}.tombstones":
                tombstones = tuple(json.loads(value))
            else:
                try:
                    runs.append((key.rsplit(".", 1)[-1], _run_from_json(value)))
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("rules snapshot: unreadable run %s skipped: %s", key, exc)
        phases.mark("snapshot parse")
        await self._remove(markers)
        if meta.get("format") != SNAPSHOT_FORMAT:
            return Snapshot(0, 0, None)  # none yet (or of another format): a full replay
        runs.sort(key=lambda item: item[1].touched_at)
        engine.restore(runs, tombstones)
        phases.mark("snapshot restore")
        self._saved = {uid for uid, _ in runs}
        self._tombstones = tombstones
        newest = meta.get("newest")
        return Snapshot(
            int(meta.get("sequence", 0)),
            len(runs),
            datetime.fromisoformat(newest) if newest else None,
            int(meta.get("findings", 0)),
        )

    async def _remove(self, markers: list[str]) -> None:
        """Purge delete markers earlier versions left (read by every start until gone); best
        effort: the next start tries again."""
        if not markers:
            return
        try:
            await forget(self._kv, markers)
            log.info("rules snapshot %s: %d delete markers removed", self._prefix, len(markers))
        except (NatsError, TimeoutError) as exc:
            log.warning("rules snapshot %s: delete markers not removed: %r", self._prefix, exc)

    async def save(
        self,
        engine: RuleEngine,
        sequence: int,
        newest: datetime | None,
        dirty: Iterable[str] | None = None,
        findings_sequence: int = 0,
    ) -> int:
        """Write the runs in ``dirty`` (every run if ``None``), remove forgotten ones, then the meta
        key saying the snapshot covers JOBS up to ``sequence`` and agrees with FINDINGS up to
        ``findings_sequence``. Returns the runs written."""
        runs = engine.held
        uids = set(runs) if dirty is None else {uid for uid in dirty if uid in runs}
        gone = self._saved - set(runs)
        await asyncio.gather(
            write(self._kv, {self._run_key(uid): _run_to_json(runs[uid]) for uid in uids}),
            forget(self._kv, [self._run_key(uid) for uid in gone]),
        )
        self._saved = (self._saved - gone) | uids
        tombstones = engine.forgotten[-MAX_TOMBSTONES:]
        if tombstones != self._tombstones:  # only when a run was forgotten: it is the big one
            await write(self._kv, {f"{self._prefix}.tombstones": json.dumps(tombstones).encode()})
            self._tombstones = tombstones
        meta = {
            "format": SNAPSHOT_FORMAT,
            "sequence": sequence,
            "findings": findings_sequence,
            "newest": newest.isoformat() if newest is not None else None,
        }
        await write(self._kv, {f"{self._prefix}.meta": json.dumps(meta, separators=(",", ":")).encode()})
        return len(uids)
