"""Rule ``failed``: no failed run without a finding — the best evidence when no rule knows why.

It holds when the run is ``Failed``, or while the run still goes on when a container of
one of its current pods has been down with a non-zero exit for ``failure_propagation_s``
(a pod replaced within that time, or a container back up, is no failure of the run). It
says which pod and container ended first, with what exit code and what that code usually
means (1, 2, 126, 127; 128 + N for signal N: 134 SIGABRT, 135 SIGBUS, 137 SIGKILL, 139
SIGSEGV, 143 SIGTERM), the termination message, and the line of its log that says what went
wrong — the exception closing a Python traceback or a CUDA / NCCL / MPI error line
(:func:`consumers.rules.errors.own_error`), not the last lines of noise. When the pod that
ended first printed none (a launcher whose tail only has mpirun's summary) and a pod that
ended after it did, that pod's line is named too: the sentence is the same whichever pod's
event came first, and the line is part of the key, so a tail that arrives later republishes it. With no
container to blame it quotes the job's ``Failed`` condition.

A job's ``Failed`` condition and its pods come on separate watches, and the pod update that
says why often arrives a moment later (with its log tail). When the job failed with no
container's end seen yet and some pod still seen running, the rule waits up to
``failed_hold_s`` (10 s) for the pods' last word before it quotes the job's condition; the
ticker re-evaluates a failed run until it has a finding.

Every other rule explains it (see the catalog): a specific finding that arrives later —
the OOM event after the job failed — resolves it with ``superseded_by``. Unlike the other
causes it is not kept on a run that ends ``Succeeded``: a container that failed and was
retried into success is no verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from consumers.rules.errors import OwnError, own_error
from consumers.rules.facts import ContainerEnd, pod_text, terminations
from consumers.rules.rule import Context, Detection, Rule, container_fact, job_fact, log_facts, pod_fact
from consumers.rules.state import PodState, RunState, pod_order
from consumers.rules.tails import bounded, last_error
from consumers.rules.wording import exit_meaning, exit_signal, mention, signal_name, who
from controller.contract.findings import Evidence

_MESSAGE_CHARS = 1000
_SENTENCE_ERROR_CHARS = 300
_TAIL_WHEN_NO_ERROR = 3


@dataclass(frozen=True)
class ContainerExit:
    """One container that ended in error, and since when the run has known it."""

    pod: PodState
    termination: ContainerEnd
    since: datetime

    @property
    def down(self) -> bool:
        """Not running again: terminated now, or waiting to be restarted."""
        return self.termination.field == "state.terminated" or self.termination.container.state == "waiting"


def exits(state: RunState, ctx: Context) -> list[ContainerExit]:
    """Containers of the run's current pods that ended with a non-zero code, first ended first."""
    found = [
        ContainerExit(pod, t, pod.failed_since or pod.changed_at)
        for pod in state.current_pods()
        for t in terminations(pod, ctx)
        if t.exit_code not in (None, 0)
    ]
    return sorted(found, key=lambda e: (e.termination.finished_at or e.since, pod_order(e.pod)))


def _container(e: ContainerExit) -> str:
    c = e.termination.container
    if c.init:
        return f" (init container {c.name})"
    return f" (container {c.name})" if sum(1 for x in e.pod.containers if not x.init) > 1 else ""


def _ended(e: ContainerExit, error: str | None) -> str:
    code = e.termination.exit_code or 0
    subject = who(e.pod) + _container(e)
    signal = exit_signal(code)
    if signal is not None:
        sentence = f"{subject} was killed by {signal_name(signal)} (exit code {code}: {exit_meaning(code)})"
    elif code == 1 and error:
        sentence = f"{subject} exited with code 1"
    else:
        sentence = f"{subject} exited with code {code} ({exit_meaning(code)})"
    return f"{sentence}: {_clip(error)}" if error else sentence


def _clip(error: str) -> str:
    if len(error) > _SENTENCE_ERROR_CHARS:
        return error[: _SENTENCE_ERROR_CHARS - 1].rstrip() + "…"
    return error


def _own(pod: PodState) -> OwnError | None:
    line = own_error(pod_text(pod))
    return OwnError(pod, line) if line is not None else None


def _exit_evidence(e: ContainerExit) -> list[Evidence]:
    t, c, pod = e.termination, e.termination.container, e.pod
    facts = [container_fact(pod, c, f"{t.field}.exitCode", t.exit_code)]
    if t.reason:
        facts.append(container_fact(pod, c, f"{t.field}.reason", t.reason))
    if t.field == "state.terminated" and c.signal:
        facts.append(container_fact(pod, c, f"{t.field}.signal", c.signal))
    if t.field == "state.terminated" and c.message:
        facts.append(container_fact(pod, c, f"{t.field}.message", c.message[-_MESSAGE_CHARS:]))
    if t.finished_at is not None:
        facts.append(container_fact(pod, c, f"{t.field}.finishedAt", t.finished_at.isoformat()))
    return facts


def _log_evidence(pod: PodState, error: str | None) -> tuple[Evidence, ...]:
    if error:
        return log_facts(pod, [error])
    lines = [line for line in bounded(pod_text(pod)) if line.strip()]
    return log_facts(pod, lines[-_TAIL_WHEN_NO_ERROR:])


def _job_failure(state: RunState) -> tuple[str, tuple[Evidence, ...]]:
    """The job's own account of its failure: the ``Failed`` condition."""
    condition = None
    if state.job is not None:
        condition = next((c for c in state.job.conditions if c.type == "Failed" and c.status == "True"), None)
    if condition is None:
        return "The job failed; no pod reported an error", (job_fact(state, "status.phase", "Failed"),)
    reason = (condition.reason or "").rstrip("/")
    message = (condition.message or "").strip().rstrip(":").strip()
    detail = ": ".join(part for part in (reason, message) if part)
    evidence = [job_fact(state, "status.conditions[Failed].reason", condition.reason or "")]
    if condition.message:
        evidence.append(job_fact(state, "status.conditions[Failed].message", condition.message))
    return (f"The job failed: {detail}" if detail else "The job failed"), tuple(evidence)


def _pod_failure(pod: PodState) -> str | None:
    """A pod Failed without a container to blame (``DeadlineExceeded``, …)."""
    if pod.phase != "Failed" or not (pod.observed.reason or pod.observed.message):
        return None
    detail = ": ".join(p for p in (pod.observed.reason, pod.observed.message) if p)
    return f"{who(pod)} failed: {detail}"


def _detect_failed(state: RunState, ctx: Context) -> Detection | None:
    if state.job is None:
        return None
    failed = state.phase == "Failed"
    if state.finished and not failed:
        return None
    found = exits(state, ctx)
    if not failed:
        found = [e for e in found if e.down and ctx.age(e.since) >= ctx.thresholds.failure_propagation_s]
        if not found:
            return None
    if not found:
        return None if _awaiting_pods(state, ctx) else _without_exit(state)
    first = found[0]
    own = own_error(pod_text(first.pod))
    error = own or last_error(pod_text(first.pod))
    elsewhere = None if own else next((o for e in found[1:] if (o := _own(e.pod)) is not None), None)
    evidence = [*_exit_evidence(first), *_log_evidence(first.pod, error)]
    if elsewhere is not None:
        evidence.extend(log_facts(elsewhere.pod, [elsewhere.line]))
    for later in found[1:4]:
        evidence.append(
            container_fact(
                later.pod,
                later.termination.container,
                f"{later.termination.field}.exitCode",
                later.termination.exit_code,
            )
        )
    if failed:
        evidence.extend(_job_failure(state)[1])
    sentence = _ended(first, error)
    after = list(dict.fromkeys(e.pod.uid for e in found if e.pod.uid != first.pod.uid))
    if after:
        sentence += f"; it ended first, then {mention(state.pods[after[0]])}"
        if len(after) > 1:
            sentence += " and others"
    if elsewhere is not None:
        sentence += f"; {mention(elsewhere.pod)} said: {_clip(elsewhere.line)}"
    return Detection(
        root_cause=sentence,
        evidence=tuple(dict.fromkeys(evidence)),
        key=(
            first.pod.uid,
            first.termination.container.name,
            str(first.termination.exit_code),
            (elsewhere.line if elsewhere is not None else error) or "",
        ),
        remediation=_remediation(first),
    )


def _awaiting_pods(state: RunState, ctx: Context) -> bool:
    """The job failed a moment ago, no container's end is seen, and some pod still runs: its
    update may say why."""
    since = state.finished_since
    if since is None or ctx.age(since) >= ctx.thresholds.failed_hold_s:
        return False
    return any(p.phase in ("Pending", "Running") and not p.deleted for p in state.current_pods())


def _without_exit(state: RunState) -> Detection:
    pod_failure = next((s for pod in state.current_pods() if (s := _pod_failure(pod)) is not None), None)
    sentence, evidence = _job_failure(state)
    failed_pods = [p for p in state.current_pods() if p.phase == "Failed"]
    extra = tuple(pod_fact(p, "status.reason", p.observed.reason) for p in failed_pods if p.observed.reason)
    return Detection(
        root_cause=pod_failure or sentence,
        evidence=evidence + extra,
        key=("job", pod_failure or sentence),
    )


def _remediation(first: ContainerExit) -> tuple[str, ...]:
    container = first.termination.container.name
    steps = [
        "Read the whole log of the container that ended first: "
        f"kubectl -n {{namespace}} logs {first.pod.name} "
        f"-c {container} --previous (or without --previous if it was not restarted).",
    ]
    steps.extend(_BY_EXIT.get(first.termination.exit_code or 0, ()))
    steps.append(
        "See every pod's last state and events: kubectl -n {namespace} describe pod " + first.pod.name,
    )
    return tuple(steps)


_BY_EXIT: dict[int, tuple[str, ...]] = {
    126: ("Make the entrypoint executable (chmod +x in the image) or run it through its interpreter.",),
    127: ("Check the command and args of the pod template and the image's PATH: the program was not found.",),
    134: (
        "SIGABRT comes from a failed assertion or an uncaught C++ exception: the lines just above the "
        "end of the log name it.",
    ),
    135: ("SIGBUS often means a full /dev/shm: mount an emptyDir with medium: Memory at /dev/shm.",),
    137: (
        "SIGKILL without an OOM finding: check kubectl describe pod for a deletion, preemption or a "
        "failed liveness probe, and the node's events for memory pressure.",
    ),
    139: (
        "A segmentation fault in native code: set PYTHONFAULTHANDLER=1 to get a stack, and check the "
        "image's CUDA / NCCL / MPI / framework builds belong together.",
    ),
    143: (
        "SIGTERM is usually a consequence: Kubernetes or the launcher stopped this pod after another "
        "one failed — look at the pod that failed before it.",
    ),
}

FAILED = Rule(
    id="failed",
    kind="cause",
    severity="critical",
    summary="The run failed and no specific rule knows why: the pod that ended first, its exit code "
    "and the error line of its log.",
    remediation=(
        "Read the log of the pod that ended first: kubectl -n {namespace} logs <pod> --previous",
        "See the job's conditions: kubectl -n {namespace} describe mpijob {job} (or trainjob {job}).",
    ),
    detect=_detect_failed,
    keeps_verdict=False,
)
