"""Replay the texts of ``tests/rules/corpus`` through the real rules engine.

Each entry becomes a short run, the way the watchers would report it:

- a text of an MPI stack (Open MPI, MPICH, Intel MPI, MVAPICH, Horovod, UCX, libfabric,
  InfiniBand) is the log tail of the *launcher* of an MPIJob (mpirun forwards every rank's
  output there), which then fails;
- any other log text is the log tail of worker 0 of a TrainJob without a launcher
  (torchrun, DeepSpeed, TensorFlow, JAX: each node pod logs its own ranks), which then fails;
- ``where: termination`` puts the text in the failed container's termination message instead;
- ``where: event`` is a Kubernetes Event with the entry's reason (the watcher's empty reason
  when the source shows none): about the Node of worker 0 for the kernel's OOM reasons
  (``SystemOOM``, ``OOMKilling``), with worker 0 failing on that node at the same time; about
  worker 0's pod for the kubelet's ``CgroupOOM``, worker 0 failing then; else about the job, whose
  pods could not be created;

and the job then ``Failed``. :func:`live_events_for` replays a log text as the rules' live
reader passes it on while the pod still runs (:class:`~controller.contract.events.LogSeen`),
before the pod ends. A near-miss (``expect: null``) is replayed twice: in a run that
*succeeds* (the text in the log of a pod that exited 0), where no finding at all may fire,
and in a run that fails, where only the catch-all ``failed`` may.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

import pytest
import yaml

from consumers.rules import RuleEngine
from controller.contract.events import (
    BusEvent,
    JobRef,
    JobSpecSummary,
    PodObserved,
    Resources,
    RoleSpec,
)
from controller.contract.findings import Finding, RuleId
from controller.testing.events import (
    at,
    job,
    k8s_event,
    launcher,
    log_seen,
    replay,
    running_run,
    terminated,
    worker,
)

CORPUS = Path(__file__).parent / "corpus"
HELD_OUT = CORPUS / "held_out"
"""Texts from threads the signatures were not written from, scored apart (never in ``load()``)."""
UNEXPLAINED = CORPUS / "unexplained"
"""Failure texts whose words do not say the cause their thread found: no rule may claim them (never in
``load()``; the corpus README, "Unexplained texts")."""
RULE_IDS: frozenset[str] = frozenset(get_args(RuleId))

LAUNCHER_STACKS = frozenset(
    {"openmpi", "mpich", "intel-mpi", "mvapich", "horovod", "ucx", "libfabric", "infiniband"}
)
NODE_OOM_REASONS = frozenset({"SystemOOM", "OOMKilling"})
POD_OOM_REASONS = frozenset({"CgroupOOM"})
"""The kubelet's Event about the Pod whose memory cgroup ran out."""

TRAINJOB = JobRef(uid="0b7c5d1e-4f2a-4c1b-9d3e-0000000000tj", kind="TrainJob", namespace="team-a", name="llm")
TRAINJOB_LIMITS = {"memory": "64Gi", "cpu": "32", "nvidia.com/gpu": "8"}
TRAINJOB_SPEC = JobSpecSummary(
    workers=2,
    slots_per_worker=8,
    runtime="torch-distributed",
    worker=RoleSpec(
        replicas=2,
        image="registry.example.com/team-a/llm:1",
        resources=Resources(limits=TRAINJOB_LIMITS, requests=TRAINJOB_LIMITS),
    ),
)


@dataclass(frozen=True)
class Entry:
    """One corpus text and what the rules should make of it."""

    id: str
    file: str
    stack: str
    where: str
    expect: RuleId | None
    text: str
    source: str = ""
    reason: str | None = None
    exit_code: int | None = None
    also_not: tuple[RuleId, ...] = ()
    near: tuple[RuleId, ...] = ()
    """Near-misses only: the rules whose failure words the text names without reporting one."""

    @property
    def on_launcher(self) -> bool:
        return self.stack in LAUNCHER_STACKS


def _rule(value: object, entry_id: str) -> RuleId:
    if value not in RULE_IDS:
        raise ValueError(f"{entry_id}: unknown rule id {value!r}")
    return cast(RuleId, value)


def load(directory: Path = CORPUS) -> list[Entry]:
    """Every entry of every corpus file in ``directory`` (not its subfolders), in file order."""
    return list(_parsed(directory.resolve()))


@functools.cache
def _parsed(directory: Path) -> tuple[Entry, ...]:
    """:func:`load`'s entries, parsed once per session: the corpus's YAML costs about a second a
    load, and several modules load the same folders."""
    entries: list[Entry] = []
    for path in sorted(directory.glob("*.yaml")):
        for raw in yaml.safe_load(path.read_text()) or ():
            item = cast(dict[str, Any], raw)
            expect = item.get("expect")
            entries.append(
                Entry(
                    id=str(item["id"]),
                    file=path.name,
                    stack=str(item["stack"]),
                    where=str(item["where"]),
                    expect=_rule(expect, item["id"]) if expect is not None else None,
                    text=str(item["text"]),
                    source=str(item.get("source") or ""),
                    reason=item.get("reason"),
                    exit_code=item.get("exit_code"),
                    also_not=tuple(_rule(r, item["id"]) for r in item.get("also_not") or ()),
                    near=tuple(_rule(r, item["id"]) for r in item.get("near") or ()),
                )
            )
    return tuple(entries)


def _lines(text: str) -> tuple[str, ...]:
    return tuple(text.splitlines())


def _failing_pod(entry: Entry, *, succeed: bool) -> PodObserved:
    """The pod whose log (or termination message) holds the text."""
    code = 0 if succeed else (entry.exit_code if entry.exit_code is not None else 1)
    reason = "Completed" if succeed else "Error"
    phase = "Succeeded" if succeed else "Failed"
    as_message = entry.where == "termination"
    tail = () if as_message else _lines(entry.text)
    message = entry.text if as_message else None
    if entry.on_launcher:
        container = terminated(reason, code, name="launcher", message=message)
        return launcher(observed_at=at(1), phase=phase, ready=False, containers=(container,), log_tail=tail)
    container = terminated(reason, code, name="node", message=message)
    return worker(
        0, job=TRAINJOB, observed_at=at(1), phase=phase, ready=False, containers=(container,), log_tail=tail
    )


def _trainjob_running() -> list[BusEvent]:
    return [
        job("Running", job=TRAINJOB, job_spec=TRAINJOB_SPEC),
        *(worker(i, job=TRAINJOB, limits=TRAINJOB_LIMITS) for i in range(2)),
    ]


def events_for(entry: Entry, *, succeed: bool = False) -> list[BusEvent]:
    """The run that carries ``entry``'s text, ending Failed (or Succeeded)."""
    ending = "Succeeded" if succeed else "Failed"
    if entry.where == "event":
        reason = entry.reason or ""  # the watcher's normalization of an Event without a reason
        if reason in NODE_OOM_REASONS:
            running = _trainjob_running()  # first: resourceVersions grow in the order events are built
            node_oom = k8s_event(
                reason, entry.text, kind="Node", involved="gpu-node-0", job=TRAINJOB, observed_at=at(1)
            )
            code = 0 if succeed else (entry.exit_code if entry.exit_code is not None else 1)
            ended = terminated("Completed" if succeed else "Error", code, name="node")
            on_node = worker(
                0, job=TRAINJOB, observed_at=at(1), phase=ending, ready=False, containers=(ended,)
            )
            return [
                *running,
                node_oom,
                on_node,
                job(ending, job=TRAINJOB, job_spec=TRAINJOB_SPEC, observed_at=at(1, 5)),
            ]
        if reason in POD_OOM_REASONS:
            running = _trainjob_running()
            code = 0 if succeed else (entry.exit_code if entry.exit_code is not None else 1)
            ended = terminated("Completed" if succeed else "Error", code, name="node")
            on_pod = worker(
                0, job=TRAINJOB, observed_at=at(1), phase=ending, ready=False, containers=(ended,)
            )
            pod_oom = k8s_event(reason, entry.text, involved=on_pod.name, job=TRAINJOB, observed_at=at(1))
            return [
                *running,
                pod_oom,
                on_pod,
                job(ending, job=TRAINJOB, job_spec=TRAINJOB_SPEC, observed_at=at(1, 5)),
            ]
        refused = k8s_event(
            reason, entry.text, kind="TrainJob", involved=TRAINJOB.name, job=TRAINJOB, observed_at=at(0, 5)
        )
        return [
            job("Pending", job=TRAINJOB, job_spec=TRAINJOB_SPEC),
            refused,
            job(ending, job=TRAINJOB, job_spec=TRAINJOB_SPEC, observed_at=at(1, 5)),
        ]
    if entry.on_launcher:
        return [*running_run(), _failing_pod(entry, succeed=succeed), job(ending, observed_at=at(1, 5))]
    return [
        *_trainjob_running(),
        _failing_pod(entry, succeed=succeed),
        job(ending, job=TRAINJOB, job_spec=TRAINJOB_SPEC, observed_at=at(1, 5)),
    ]


@dataclass(frozen=True)
class ReplayOutcome:
    """What the engine published while replaying one entry, and what fires at the end."""

    changes: tuple[Finding, ...]
    firing: tuple[Finding, ...]

    @property
    def rules(self) -> frozenset[RuleId]:
        return frozenset(f.rule for f in self.firing)


@functools.cache
def run(entry: Entry, *, succeed: bool = False) -> ReplayOutcome:
    """Replay ``entry`` through a fresh engine; once per session for each entry and ending (the
    outcome is immutable, and several modules assert different things about the same replay)."""
    engine = RuleEngine()
    changes = replay(engine, events_for(entry, succeed=succeed), at(2))
    return ReplayOutcome(tuple(changes), tuple(engine.firing()))


def replayed(
    text: str,
    expect: RuleId | None,
    *,
    stack: str,
    where: str = "log",
    reason: str | None = None,
    succeed: bool = False,
) -> ReplayOutcome:
    """:func:`run` on ``text`` written as one entry of the corpus (a unit test's own wording)."""
    entry = Entry(id="t", file="t", stack=stack, where=where, reason=reason, expect=expect, text=text)
    return run(entry, succeed=succeed)


def rules_fired(
    text: str, expect: RuleId | None, *, stack: str = "other", where: str = "log", reason: str | None = None
) -> set[str]:
    """The rules ``text`` fires, the catch-all aside."""
    return set(replayed(text, expect, stack=stack, where=where, reason=reason).rules) - {"failed"}


def root_cause_of(
    text: str, expect: RuleId, *, stack: str, where: str = "log", reason: str | None = None
) -> str:
    """The root cause of the ``expect`` finding ``text`` fires."""
    firing = replayed(text, expect, stack=stack, where=where, reason=reason).firing
    return next(f.root_cause for f in firing if f.rule == expect)


def fires_alone(
    text: str, rule: RuleId, *, stack: str = "other", where: str = "log", reason: str | None = None
) -> Finding:
    """The ``rule`` finding ``text`` fires, asserting it fires no other rule (the catch-all aside)."""
    outcome = replayed(text, rule, stack=stack, where=where, reason=reason)
    assert outcome.rules - {"failed"} == {rule}, outcome.rules
    (finding,) = [f for f in outcome.firing if f.rule == rule]
    return finding


def fires_saying(text: str, rule: RuleId, said: str, step: str, **how: str) -> Finding:
    """:func:`fires_alone` (``how``: its stack, where, reason), its root cause saying ``said`` and a step of
    its remediation ``step``."""
    finding = fires_alone(text, rule, **how)
    assert said in finding.root_cause, finding.root_cause
    assert any(step in s for s in finding.remediation), finding.remediation
    return finding


Wording = tuple[str, str, str, str]
"""Another wording of a family: the text, what the root cause says, a step of the remediation,
and the stack it is replayed as."""

WORDING_ARGS = ("rule", "text", "said", "step", "stack")
"""The arguments of a test over :func:`wordings`."""


def wordings(tables: Mapping[RuleId, Mapping[str, Wording]]) -> list[pytest.ParameterSet]:
    """One test case per wording of each rule's table, named by its key: the arguments of
    :data:`WORDING_ARGS`, for :func:`fires_saying`."""
    return [
        pytest.param(rule, *row, id=name) for rule, table in tables.items() for name, row in table.items()
    ]


Catalog = Mapping[str, tuple[RuleId, Wording]]
"""A library's own messages: by key, the rule each is and its :data:`Wording`."""


def catalog_rows(catalogs: Mapping[str, Catalog]) -> list[pytest.ParameterSet]:
    """One test case per message of each library's catalog, named ``<library>-<key>``: the
    arguments of :data:`WORDING_ARGS`, for :func:`fires_saying`."""
    return [
        pytest.param(rule, *row, id=f"{library}-{key}")
        for library, catalog in catalogs.items()
        for key, (rule, row) in catalog.items()
    ]


def stays_quiet(text: str, *, stack: str = "other", where: str = "log", reason: str | None = None) -> None:
    """``text`` (a log's, or an Event's with its ``reason``) fires nothing in a run that succeeds, and only
    the catch-all in one that fails."""
    assert replayed(text, None, stack=stack, where=where, reason=reason, succeed=True).rules == set()
    assert replayed(text, None, stack=stack, where=where, reason=reason).rules <= {"failed"}


def live_events_for(entry: Entry, *, succeed: bool = False, end: bool = True) -> list[BusEvent]:
    """A run whose running pod prints ``entry``'s log text (seen live, at 30 s), then (``end``)
    ends: the pod with code 0 and the run Succeeded, or as :func:`events_for` ends it."""
    if entry.where != "log":
        raise ValueError(f"{entry.id}: only a log text is printed live")
    running = running_run() if entry.on_launcher else _trainjob_running()
    printer = cast(PodObserved, running[1])  # the launcher, or worker 0 of the TrainJob
    seen = log_seen(*_lines(entry.text), observed_at=at(0, 30), pod=printer)
    if not end:
        return [*running, seen]
    ending = "Succeeded" if succeed else "Failed"
    if entry.on_launcher:
        return [*running, seen, _failing_pod(entry, succeed=succeed), job(ending, observed_at=at(1, 5))]
    finished = job(ending, job=TRAINJOB, job_spec=TRAINJOB_SPEC, observed_at=at(1, 5))
    return [*running, seen, _failing_pod(entry, succeed=succeed), finished]


def run_live(entry: Entry, *, succeed: bool = False, end: bool = True) -> ReplayOutcome:
    """Replay :func:`live_events_for` ``entry`` through a fresh engine (ticking at 2 min if it ends)."""
    engine = RuleEngine()
    ticks = (at(2),) if end else ()
    changes = replay(engine, live_events_for(entry, succeed=succeed, end=end), *ticks)
    return ReplayOutcome(tuple(changes), tuple(engine.firing()))
