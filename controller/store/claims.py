"""What an UPDATE's admission record claims changed, against the change the watch saw.

An admission record for an UPDATE lists the field paths that differ (``changes``:
``spec.mpiReplicaSpecs.Worker.replicas``, ``metadata.labels.team``, …). The watch stream shows each
version of the job with ``metadata.generation``, its labels and a summary of its spec
(:class:`~controller.contract.events.JobSpecSummary`); two consecutive versions give the watched
change. :func:`judge_update` compares the two, checking what the watch can see:

- **spec**: a claim naming any ``spec…`` path needs the spec to have changed (the generation
  rose, or a summary field differs): a status update bears out no spec claim. A claim naming
  none needs the spec unchanged: a scale is not a label edit.
- **summary fields**: a claimed path the summary holds verbatim (replica counts, MPI slots per
  worker, a TrainJob's image or runtime) must have changed; every summary field that changed must
  be covered by a claimed path (at, above or below the path it is read from).
- **labels**: every claimed label changed, every changed label is claimed.

A claim whose list was cut at 50 paths (it ends with ``…``) is checked only one way: what it
names must have changed. A claim naming only what the watch does not carry (annotations,
finalizers, owner references, or nothing at all) can be neither borne out nor refuted by a change
without a visible difference: :attr:`ClaimOutcome.INVISIBLE`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.contract.kinds import KINDS, JobKind, KindSpec

__all__ = ["ClaimOutcome", "Judgement", "Seen", "judge_update"]

TRUNCATED = "…"
"""The last entry of a ``changes`` list that was cut (``watchers.admission.reviews.MAX_CHANGES``)."""


class ClaimOutcome(enum.Enum):
    """What one watched change says about one claim."""

    MATCH = "match"
    """The watched change is the claimed one, as far as the watch can see."""
    INVISIBLE = "invisible"
    """The claim names nothing the watch carries, and the change shows no visible difference."""
    UNKNOWN = "unknown"
    """The watched change cannot be compared: no earlier version, or one without the details."""
    MISMATCH = "mismatch"
    """The watched change is not the claimed one."""


@dataclass(frozen=True)
class Judgement:
    """An :class:`ClaimOutcome` and, in words, why."""

    outcome: ClaimOutcome
    why: str


@dataclass(frozen=True)
class Seen:
    """One version of a job as the watch showed it; None where it was not kept."""

    resource_version: str
    generation: int | None
    spec: Mapping[str, Any] | None
    """The :class:`~controller.contract.events.JobSpecSummary` as JSON."""
    labels: Mapping[str, str] | None


@dataclass(frozen=True)
class _Field:
    """A summary field: where it sits in the summary, which object paths it is read from."""

    key: tuple[str, ...]
    paths: tuple[str, ...]
    verbatim: bool = False
    """The summary holds the value of ``paths[0]`` as it is: a claimed change there must show."""

    @property
    def name(self) -> str:
        return ".".join(self.key)


def _mpijob_fields() -> tuple[_Field, ...]:
    roles = (("worker", "Worker"), ("launcher", "Launcher"))
    return (
        *(
            _Field((role, "replicas"), (f"spec.mpiReplicaSpecs.{spec}.replicas",), True)
            for role, spec in roles
        ),
        _Field(("slots_per_worker",), ("spec.slotsPerWorker",), True),
        _Field(("mpi_implementation",), ("spec.mpiImplementation",)),
        _Field(("suspend",), ("spec.runPolicy.suspend",)),
        *(
            _Field((role, part), (f"spec.mpiReplicaSpecs.{spec}.template.spec.containers",))
            for role, spec in roles
            for part in ("image", "command", "resources")
        ),
    )


def _replica_fields(field: str) -> tuple[_Field, ...]:
    """A training-operator kind: the replica counts per type, the workers' template, suspension."""
    specs = f"spec.{field}"
    return (
        _Field(("replicas",), (specs,)),
        *(_Field(("worker", part), (specs,)) for part in ("image", "command", "resources")),
        _Field(("suspend",), ("spec.runPolicy.suspend",)),
    )


_TRAINJOB_FIELDS = (
    _Field(("worker", "replicas"), ("spec.trainer.numNodes",), True),
    _Field(("worker", "image"), ("spec.trainer.image",), True),
    _Field(("worker", "command"), ("spec.trainer.command", "spec.trainer.args")),
    _Field(("worker", "resources"), ("spec.trainer.resourcesPerNode",)),
    _Field(("slots_per_worker",), ("spec.trainer.numProcPerNode",)),
    _Field(("runtime",), ("spec.runtimeRef.name",), True),
    _Field(("suspend",), ("spec.suspend",)),
)


def _fields(spec: KindSpec) -> tuple[_Field, ...]:
    if spec.family == "mpi-operator":
        return _mpijob_fields()
    if spec.family == "trainer" or spec.replica_specs is None:
        return _TRAINJOB_FIELDS
    return _replica_fields(spec.replica_specs)


_FIELDS: dict[JobKind, tuple[_Field, ...]] = {spec.kind: _fields(spec) for spec in KINDS}
"""What :mod:`watchers.normalizing` summarizes, per kind, and from where."""

_LABELS = "metadata.labels"


@dataclass(frozen=True)
class _Claim:
    spec: tuple[str, ...]
    labels: frozenset[str]
    all_labels: bool
    """The whole ``metadata.labels`` map was added or removed."""
    truncated: bool

    @property
    def visible(self) -> bool:
        return bool(self.spec or self.labels or self.all_labels)


def _claim(changes: Sequence[str]) -> _Claim:
    spec = tuple(p for p in changes if p == "spec" or p.startswith("spec."))
    labels = frozenset(p.removeprefix(f"{_LABELS}.") for p in changes if p.startswith(f"{_LABELS}."))
    return _Claim(spec, labels, _LABELS in changes, TRUNCATED in changes)


def _covers(claimed: str, path: str) -> bool:
    return claimed == path or path.startswith(f"{claimed}.") or claimed.startswith(f"{path}.")


def _value(spec: Mapping[str, Any], key: tuple[str, ...]) -> Any:
    value: Any = spec
    for part in key:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _shown(value: Any) -> str:
    return "unset" if value is None else repr(value) if isinstance(value, str) else str(value)


def judge_update(kind: JobKind, changes: Sequence[str], before: Seen | None, after: Seen) -> Judgement:
    """Does the change from ``before`` to ``after`` (two versions the watch saw) bear out an UPDATE
    that claims ``changes``? See the module docstring for what is compared."""
    if before is None:
        return Judgement(
            ClaimOutcome.UNKNOWN, f"the watch kept no version before resourceVersion {after.resource_version}"
        )
    if before.spec is None or after.spec is None or before.labels is None or after.labels is None:
        return Judgement(ClaimOutcome.UNKNOWN, "the watch kept these versions without their spec and labels")
    claim = _claim(changes)
    fields = _FIELDS[kind]
    changed = {f.name: f for f in fields if _value(before.spec, f.key) != _value(after.spec, f.key)}
    moves = {
        name: f"{name} {_shown(_value(before.spec, f.key))} → {_shown(_value(after.spec, f.key))}"
        for name, f in changed.items()
    }
    generations = f"generation {_shown(before.generation)} → {_shown(after.generation)}"
    spec_changed: bool | None = bool(changed) or None
    if before.generation is not None and after.generation is not None:
        spec_changed = bool(changed) or before.generation != after.generation
    if claim.spec:
        if spec_changed is None:
            return Judgement(
                ClaimOutcome.UNKNOWN, "the watch cannot tell whether the spec changed (no generation)"
            )
        if not spec_changed:
            return Judgement(
                ClaimOutcome.MISMATCH,
                f"claims {', '.join(claim.spec)} changed; the watched change left the spec as it was "
                f"({generations}: status or metadata only)",
            )
    elif spec_changed and not claim.truncated:
        return Judgement(
            ClaimOutcome.MISMATCH,
            f"the watched change changed the spec ({'; '.join([generations, *moves.values()])}), "
            "which the record does not claim",
        )
    for f in fields:
        if f.verbatim and f.paths[0] in claim.spec and f.name not in changed:
            return Judgement(
                ClaimOutcome.MISMATCH,
                f"claims {f.paths[0]} changed; the watch saw {f.name} stay "
                f"{_shown(_value(after.spec, f.key))}",
            )
    if not claim.truncated:
        for name, f in changed.items():
            if not any(_covers(claimed, path) for claimed in claim.spec for path in f.paths):
                return Judgement(
                    ClaimOutcome.MISMATCH, f"the watch saw {moves[name]}, which the record does not claim"
                )
    relabelled = {
        k for k in before.labels.keys() | after.labels.keys() if before.labels.get(k) != after.labels.get(k)
    }
    if claim.all_labels and not relabelled:
        return Judgement(ClaimOutcome.MISMATCH, "claims the labels changed; the watch saw them unchanged")
    if unchanged := sorted(claim.labels - relabelled):
        return Judgement(
            ClaimOutcome.MISMATCH, f"claims label {unchanged[0]} changed; the watch saw it unchanged"
        )
    if not (claim.truncated or claim.all_labels) and (unclaimed := sorted(relabelled - claim.labels)):
        return Judgement(
            ClaimOutcome.MISMATCH,
            f"the watch saw label {unclaimed[0]} change, which the record does not claim",
        )
    if not claim.visible:
        return Judgement(
            ClaimOutcome.INVISIBLE,
            "claims only what the watch does not carry "
            f"({', '.join(changes) or 'no field'}); the watched change shows no spec or label change",
        )
    seen = [generations, *moves.values()] if claim.spec else []
    seen += [f"label {k}" for k in sorted(relabelled)]
    return Judgement(
        ClaimOutcome.MATCH, f"the watch saw {'; '.join(seen)} at resourceVersion {after.resource_version}"
    )
