"""The rules engine: per-run state in, changes of findings out.

:func:`evaluate` is the pure core: given a run's state and ``now`` it returns the findings
whose condition holds, after dropping those another finding explains. :class:`RuleEngine`
wraps it for a stream of events: it folds each event into the run's state, keeps the
findings that are firing, and returns only what changed —

- a rule starts to hold → a new ``firing`` finding (revision 1, or the next revision of
  the same id when the problem comes back);
- it still holds with the same :attr:`Detection.key` → nothing is returned, ``last_seen``
  moves (a repeated OOM event is the same OOM);
- it holds with another key (another pod, another host, another cause) → the finding
  again, ``firing``, with the new sentence and evidence and the next revision;
- it stops holding → ``resolved``, unless its rule asks to settle first (crash loops
  flap) or it is a cause of a finished run: a failed run's cause stays its verdict
  (the catch-all ``failed`` excepted, see :attr:`Rule.keeps_verdict`).
  Stalls of a finished run resolve. A finding explained by another is resolved with
  ``superseded_by``.

Lines seen in a running job's output (``LogSeen``, :mod:`consumers.rules.live`) are judged at
each evaluation (:func:`~consumers.rules.liveverdicts.judge_live`): the confirmed ones are read
like a failure-time tail; while some are still pending, the causes they alone would show are
published as ``pending`` findings (:func:`observed`): what was seen, worded as such ("Worker-1
printed … at 10:42:07 UTC; the job is still running"), which the notifier never announces as firing. A
pending finding becomes ``firing`` (its next revision) once its lines are confirmed, and resolves
as soon as it stops holding; it never stays as a verdict. A rule may itself say that what it
read is not yet a verdict (``quota``: a refusal the operator is still retrying), with the same
effect. A cause that holds only on lines seen live stays as the verdict of a run that failed,
not of one that succeeded.

``observe(event, now)`` re-evaluates the event's run (``observe_all`` once per streak of
one run's events); ``tick(now)`` re-evaluates every
live run, which drives the time-based rules. ``now`` is always injected. After a restart
the consumer rebuilds the runs by observing the stream again without publishing, then
``reconcile`` lines the engine up with the last change published for each finding. Finished runs
are forgotten ``forget_after_s`` after their last event, and events of a forgotten run are
ignored. Memory is bounded twice: at most ``max_runs`` runs and ``max_pods`` pods held (a run
costs about 8 KiB per pod, so runs of many pods reach the memory limit long before the runs
bound). Over either bound the least recently updated finished run goes first (remembered as
forgotten); with none left, the least recently updated live run is dropped with a warning — its
next event admits it again, rebuilt from that event on. The run an event is being folded into
is never dropped for it, so one run larger than ``max_pods`` is still judged.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType

from consumers.rules.catalog import CATALOG
from consumers.rules.liveverdicts import (
    has_live_text,
    has_pending,
    judge_live,
    pending_mark,
    with_pending,
    without_live,
)
from consumers.rules.rule import Context, Detection, Rule
from consumers.rules.state import RunState
from consumers.rules.thresholds import RuleThresholds
from consumers.rules.wording import printed, rank_subject
from controller.contract.events import BusEvent, LogSeen, job_of
from controller.contract.findings import ACTIVE, Finding, RuleId, Severity, dedup_key, finding_id

log = logging.getLogger(__name__)


def detect(state: RunState, ctx: Context, rules: Sequence[Rule] = CATALOG) -> dict[RuleId, Detection]:
    """Every rule whose condition holds now, explained or not (stalls only while live); then, for
    a live run with lines seen in its output that are not yet a verdict, the causes those lines
    would show, as observations (:func:`observed`)."""
    judge_live(state, ctx.now, ctx.thresholds)
    found: dict[RuleId, Detection] = {}
    for rule in rules:
        if rule.kind == "stall" and state.finished:
            continue
        detection = rule.detect(state, ctx)
        if detection is not None:
            found[rule.id] = detection
    if has_pending(state) and not state.finished:
        view = with_pending(state)
        for rule in rules:
            if rule.kind == "cause" and rule.id not in found and rule.keeps_verdict:
                detection = rule.detect(view, ctx)
                if detection is not None:
                    found[rule.id] = observed(view, detection)
    return found


def observed(state: RunState, detection: Detection) -> Detection:
    """A cause read from lines of a running job's output that are still evidence: said as what
    was seen (who printed which line when, still running), never as a failure."""
    mark = pending_mark(state, detection.evidence)
    if mark is None:  # no pending line behind it: say what the rule read, as seen
        sentence = f"Seen while the job runs: {detection.root_cause}; the job is still running"
    else:
        pod, seen = mark
        sentence = printed(rank_subject(state, pod, seen.rank), seen.line, seen.at)
    return replace(detection, root_cause=sentence, tentative=True)


def explanation(rule: Rule, active: Iterable[RuleId], rules: Sequence[Rule] = CATALOG) -> RuleId | None:
    """The first rule (in catalog order) among ``active`` that explains ``rule``, if any."""
    present = set(active) & rule.explained_by
    return next((r.id for r in rules if r.id in present), None)


def evaluate(
    state: RunState,
    now: datetime,
    thresholds: RuleThresholds | None = None,
    rules: Sequence[Rule] = CATALOG,
) -> list[Finding]:
    """The findings that hold for ``state`` at ``now``, as a stateless snapshot."""
    ctx = Context(now, (thresholds or RuleThresholds()).for_namespace(state.ref.namespace))
    found = detect(state, ctx, rules)
    return [
        _finding(state, rule, found[rule.id], now, revision=1)
        for rule in rules
        if rule.id in found and explanation(rule, found, rules) is None
    ]


def _finding(
    state: RunState,
    rule: Rule,
    detection: Detection,
    now: datetime,
    *,
    revision: int,
    first_seen: datetime | None = None,
) -> Finding:
    remediation = detection.remediation if detection.remediation is not None else rule.remediation
    job = state.ref
    return Finding(
        id=finding_id(job.uid, rule.id),
        rule=rule.id,
        severity=_severity(rule, detection),
        status="pending" if detection.tentative else "firing",
        job=job,
        root_cause=detection.root_cause,
        evidence=detection.evidence,
        remediation=tuple(step.format(namespace=job.namespace, job=job.name) for step in remediation),
        doc_anchor=rule.doc_anchor,
        dedup_key=dedup_key(job.uid, rule.id),
        revision=revision,
        first_seen=first_seen or now,
        last_seen=now,
    )


def _severity(rule: Rule, detection: Detection) -> Severity:
    """An observation is at most a warning; a verdict speaks with its rule's severity."""
    if detection.tentative:
        return "warning"
    return detection.severity or rule.severity


def _live_only(
    state: RunState, ctx: Context, found: Mapping[RuleId, Detection], rules: Mapping[RuleId, Rule]
) -> set[RuleId]:
    """The causes found that hold only because of lines seen live."""
    without = without_live(state)
    return {
        rid
        for rid, detection in found.items()
        if not detection.tentative and rules[rid].kind == "cause" and rules[rid].detect(without, ctx) is None
    }


class _Held(OrderedDict[str, "HeldRun"]):
    """The runs held, least recently updated first, and how many pods they hold together.

    Runs grow by pods after they are admitted: :meth:`RuleEngine._fold` adds what an event
    added; a run put in or taken out counts with the pods it holds then."""

    def __init__(self) -> None:
        super().__init__()
        self.pods = 0

    def __setitem__(self, uid: str, run: HeldRun) -> None:
        old = self.get(uid)
        self.pods += len(run.state.pods) - (len(old.state.pods) if old is not None else 0)
        super().__setitem__(uid, run)

    def __delitem__(self, uid: str) -> None:
        self.pods -= len(self[uid].state.pods)
        super().__delitem__(uid)

    def pop(self, uid: str, default: HeldRun | None = None) -> HeldRun | None:  # type: ignore[override]
        run = super().pop(uid, None)
        if run is None:
            return default
        self.pods -= len(run.state.pods)
        return run

    def popitem(self, last: bool = True) -> tuple[str, HeldRun]:
        uid, run = super().popitem(last)
        self.pods -= len(run.state.pods)
        return uid, run

    def clear(self) -> None:
        super().clear()
        self.pods = 0


@dataclass
class HeldRun:
    """One run's state, its firing findings and the bookkeeping to deduplicate them."""

    state: RunState
    touched_at: datetime
    firing: dict[RuleId, Finding] = field(default_factory=dict)
    keys: dict[RuleId, tuple[str, ...]] = field(default_factory=dict)
    revisions: dict[RuleId, int] = field(default_factory=dict)
    tentative: set[RuleId] = field(default_factory=set)
    """Rules firing as a warning read from live lines not yet a verdict (:func:`tentative`)."""
    live_only: set[RuleId] = field(default_factory=set)
    """Rules firing on lines seen live alone (no failure-time tail says it): a verdict only of a
    run that failed."""

    def next_revision(self, rule: RuleId) -> int:
        self.revisions[rule] = self.revisions.get(rule, 0) + 1
        return self.revisions[rule]


class RuleEngine:
    """Keeps per-run state and firing findings; returns the changes each event or tick makes."""

    def __init__(self, thresholds: RuleThresholds | None = None, rules: Sequence[Rule] = CATALOG) -> None:
        self._thresholds = thresholds or RuleThresholds()
        self._rules = tuple(rules)
        self._by_id = {rule.id: rule for rule in self._rules}
        self._runs = _Held()
        self._forgotten: OrderedDict[str, None] = OrderedDict()
        self._by_namespace: dict[str, RuleThresholds] = {}

    # ------------------------------------------------------------------ public

    def observe(self, event: BusEvent, now: datetime) -> list[Finding]:
        """Fold ``event`` into its run and return the findings that changed."""
        run = self._fold(event, now)
        return self._evaluate(run, now) if run is not None else []

    def observe_all(self, timed: Iterable[tuple[BusEvent, datetime]]) -> list[Finding]:
        """Fold events in order, each at its time, judging a run once per streak of its events.

        Consecutive events of one run (a relist passes a job's pods one after the other) are
        folded before the run is judged, at the last one's time: they were observed together,
        and the state keeps what the rules read from the ones in between (terminations,
        restarts, recent Events). Where runs alternate, each event is judged as it comes."""
        changes: list[Finding] = []
        streak: tuple[HeldRun, datetime] | None = None
        for event, now in timed:
            run = self._fold(event, now)
            if streak is not None and streak[0] is not run:
                changes += self._evaluate(*streak)
            streak = (run, now) if run is not None else None
        if streak is not None:
            changes += self._evaluate(*streak)
        return changes

    def tick(self, now: datetime) -> list[Finding]:
        """Re-evaluate every live run at ``now`` and forget runs finished long enough ago."""
        return [change for changes in self.ticking(now) for change in changes]

    def ticking(self, now: datetime) -> Iterator[list[Finding]]:
        """:meth:`tick`, run by run: the changes of each run held when it starts, once it is
        re-evaluated or forgotten (so that a caller may let other work run in between)."""
        for uid, run in list(self._runs.items()):
            if self._stale(run, now):
                self._forget(uid, tombstone=run.state.finished)
                yield []
            elif not run.state.finished or self._awaiting_verdict(run):
                yield self._evaluate(run, now)
            else:
                yield []

    def reconcile(self, published: Mapping[str, Finding], now: datetime) -> list[Finding]:
        """Line up with what the bus last said about each finding of the runs held.

        ``published`` maps finding ids to the last change published for each (the highest
        revision). Revision counters move past what was published, so no later change is
        taken downstream for an old one; where the bus and the engine disagree on whether a
        finding holds, or on whether it is pending or firing (a change lost between computing
        and publishing it, events that arrived while no consumer ran), the change that makes
        the bus agree is returned. Sentences and evidence are not compared: a finding in the
        same status on both sides is left as the bus has it until its next real change.
        """
        changes: list[Finding] = []
        # Only the (run, rule) pairs with a finding held or on the bus can change. An id is a
        # uuid5 of the pair, and computing it for every rule of every run held was most of a
        # warm start's reconcile (600 runs x the catalog): the bus's findings are found by their
        # run and rule instead, each id checked against them once.
        listed: dict[str, dict[RuleId, Finding]] = {}
        for key, finding in published.items():
            if finding_id(finding.job.uid, finding.rule) == key:
                listed.setdefault(finding.job.uid, {})[finding.rule] = finding
        for run in self._runs.values():
            of_run = listed.get(run.state.ref.uid, {})
            if not run.firing and not of_run:
                continue
            for rule in self._rules:
                if rule.id not in of_run and rule.id not in run.firing:
                    continue
                last = of_run.get(rule.id)
                if last is not None and last.revision > run.revisions.get(rule.id, 0):
                    run.revisions[rule.id] = last.revision
                current = run.firing.get(rule.id)
                on_bus = last is not None and last.status in ACTIVE
                if current is not None and (last is None or last.status != current.status):
                    current = current.model_copy(update={"revision": run.next_revision(rule.id)})
                    run.firing[rule.id] = current
                    changes.append(current)
                elif current is not None and last is not None:
                    run.firing[rule.id] = current.model_copy(
                        update={"revision": last.revision, "first_seen": last.first_seen}
                    )
                elif current is None and last is not None and on_bus:
                    changes.append(
                        last.model_copy(
                            update={
                                "status": "resolved",
                                "resolved_at": now,
                                "superseded_by": explanation(rule, run.firing, self._rules),
                                "revision": run.next_revision(rule.id),
                            }
                        )
                    )
        return changes

    def firing(self, job_uid: str | None = None) -> list[Finding]:
        """Findings that hold now (firing or pending), of one run or of all."""
        if job_uid is None:
            return [f for run in self._runs.values() for f in run.firing.values()]
        run = self._runs.get(job_uid)
        return list(run.firing.values()) if run is not None else []

    def state(self, job_uid: str) -> RunState | None:
        """The state held for a run, if any (for inspection and tests)."""
        run = self._runs.get(job_uid)
        return run.state if run is not None else None

    def __len__(self) -> int:
        return len(self._runs)

    @property
    def pods_held(self) -> int:
        """Pods of every run held (the unit of ``max_pods``)."""
        return self._runs.pods

    @property
    def held(self) -> Mapping[str, HeldRun]:
        """The runs held by job uid, least recently updated first (what a snapshot writes)."""
        return MappingProxyType(self._runs)

    @property
    def forgotten(self) -> tuple[str, ...]:
        """The finished runs forgotten, oldest first: their late events stay ignored."""
        return tuple(self._forgotten)

    def restore(self, runs: Iterable[tuple[str, HeldRun]], forgotten: Iterable[str]) -> None:
        """Take in what a snapshot held: its runs (least recently updated first) and the runs it
        had forgotten. For an engine that has observed nothing yet."""
        for uid, run in runs:
            self._runs[uid] = run
        for uid in forgotten:
            self._forgotten[uid] = None

    # ----------------------------------------------------------------- private

    def _fold(self, event: BusEvent, now: datetime) -> HeldRun | None:
        """Apply ``event`` to its run (admitted if new); None for a forgotten run."""
        uid = job_of(event).uid
        if uid in self._forgotten:
            return None
        run = self._runs.get(uid)
        if run is None and isinstance(event, LogSeen):
            return None  # output of a run not held: its pods are not known to judge it by
        if run is None:
            run = self._admit(uid, RunState.for_event(event), now)
        pods = len(run.state.pods)
        run.state.apply(event)
        self._runs.pods += len(run.state.pods) - pods
        run.touched_at = now
        self._runs.move_to_end(uid)
        if self._runs.pods > self._thresholds.max_pods:
            self._shed(keep=uid)
        return run

    def _thresholds_for(self, namespace: str) -> RuleThresholds:
        held = self._by_namespace.get(namespace)
        if held is None:
            held = self._by_namespace[namespace] = self._thresholds.for_namespace(namespace)
        return held

    def _evaluate(self, run: HeldRun, now: datetime) -> list[Finding]:
        state = run.state
        thresholds = self._thresholds_for(state.ref.namespace)
        ctx = Context(now, thresholds)
        found = detect(state, ctx, self._rules)
        if has_live_text(state) or run.live_only:  # what still holds is judged again, the rest kept
            live = _live_only(state, ctx, found, self._by_id) if has_live_text(state) else set()
            run.live_only = {rid for rid in run.live_only if rid not in found} | live
        kept = {rid for rid in run.firing if rid not in found and self._keeps(rid, run, now, thresholds)}
        active = found.keys() | kept
        changes: list[Finding] = []
        for rule in self._rules:
            current = run.firing.get(rule.id)
            detection = found.get(rule.id)
            if detection is None and current is None:
                continue  # neither holds nor held: nothing to explain away (most rules, most events)
            because = explanation(rule, active, self._rules)
            if detection is not None and because is None:
                change = self._fire(run, rule, detection, now)
                if change is not None:
                    changes.append(change)
            elif current is not None and (because is not None or rule.id not in kept):
                changes.append(self._resolve(run, rule.id, now, because))
        return changes

    def _keeps(self, rule_id: RuleId, run: HeldRun, now: datetime, thresholds: RuleThresholds) -> bool:
        """Whether a firing finding whose condition no longer holds stays firing."""
        rule = self._by_id[rule_id]
        if rule_id in run.tentative:
            return False
        if rule_id in run.live_only and run.state.finished and run.state.phase != "Failed":
            return False
        if rule.kind == "cause" and run.state.finished and rule.keeps_verdict:
            return True
        if rule.kind == "stall" and run.state.finished:
            return False
        return (now - run.firing[rule_id].last_seen).total_seconds() < rule.settle_s(thresholds)

    def _fire(self, run: HeldRun, rule: Rule, detection: Detection, now: datetime) -> Finding | None:
        current = run.firing.get(rule.id)
        if detection.tentative and current is not None and current.status == "firing":
            run.firing[rule.id] = current.model_copy(update={"last_seen": now})
            return None  # confirmed once: a verdict is not taken back to an observation
        if detection.tentative:
            run.tentative.add(rule.id)
        else:
            run.tentative.discard(rule.id)
        if (
            current is not None
            and run.keys.get(rule.id) == detection.key
            and current.severity == _severity(rule, detection)
            and current.status == ("pending" if detection.tentative else "firing")
        ):
            run.firing[rule.id] = current.model_copy(update={"last_seen": now})
            return None
        first_seen = current.first_seen if current is not None else None
        finding = _finding(
            run.state, rule, detection, now, revision=run.next_revision(rule.id), first_seen=first_seen
        )
        run.firing[rule.id] = finding
        run.keys[rule.id] = detection.key
        return finding

    def _resolve(self, run: HeldRun, rule_id: RuleId, now: datetime, because: RuleId | None) -> Finding:
        current = run.firing.pop(rule_id)
        run.keys.pop(rule_id, None)
        run.tentative.discard(rule_id)
        run.live_only.discard(rule_id)
        return current.model_copy(
            update={
                "status": "resolved",
                "resolved_at": now,
                "superseded_by": because,
                "revision": run.next_revision(rule_id),
            }
        )

    def _admit(self, uid: str, state: RunState, now: datetime) -> HeldRun:
        if len(self._runs) >= self._thresholds.max_runs:
            self._drop_one(keep=None, bound="runs")
        run = self._runs[uid] = HeldRun(state=state, touched_at=now)
        return run

    def _shed(self, keep: str) -> None:
        """Drop runs until the pods held fit ``max_pods`` again (never the run ``keep``)."""
        while self._runs.pods > self._thresholds.max_pods and self._drop_one(keep, bound="pods"):
            pass

    def _drop_one(self, keep: str | None, *, bound: str) -> bool:
        """Forget the least recently updated finished run, else live run, other than ``keep``."""
        victim = next((u for u, r in self._runs.items() if u != keep and r.state.finished), None)
        if victim is None:
            victim = next((u for u in self._runs if u != keep), None)
            if victim is None:
                return False
            log.warning(
                "rules engine holds %d runs of %d pods (over max_%s); dropping live run %s",
                len(self._runs),
                self._runs.pods,
                bound,
                victim,
            )
        self._forget(victim, tombstone=self._runs[victim].state.finished)
        return True

    @staticmethod
    def _awaiting_verdict(run: HeldRun) -> bool:
        """A failed run without a finding yet: the catch-all may be holding for its pods.

        Other finished runs' findings no longer change with time."""
        return run.state.phase == "Failed" and not run.firing

    def _stale(self, run: HeldRun, now: datetime) -> bool:
        """Finished, or never seen as a job, and quiet for ``forget_after_s``."""
        if not run.state.finished and run.state.job is not None:
            return False
        return (now - run.touched_at).total_seconds() >= self._thresholds.forget_after_s

    def _forget(self, uid: str, *, tombstone: bool) -> None:
        """Drop a run; a finished one is remembered as such, so its late events are ignored."""
        self._runs.pop(uid, None)
        if tombstone:
            self._forgotten[uid] = None
            while len(self._forgotten) > self._thresholds.max_runs:
                self._forgotten.popitem(last=False)
