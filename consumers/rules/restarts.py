"""Rule ``restarting``: the operator is restarting the job, told once per restart.

A training-operator job (and an MPIJob) whose replica fails under ``restartPolicy: OnFailure``
or ``ExitCode`` is not failed: the operator sets the job's ``Restarting`` condition, recreates
the replica and, within ``runPolicy.backoffLimit``, carries on. Each restart is one finding,
keyed by the condition's transition time — the same restart never again, the next one anew —
and it resolves when the job runs again or ends; the failed replica's own cause (an OOM kill, a
rank's exit code) stays with its rule. While the job restarts, a failed replica is not "a
failure the job did not notice" (``failure-propagation`` stays quiet).
"""

from __future__ import annotations

from consumers.rules.facts import terminations
from consumers.rules.rule import Context, Detection, Rule, job_fact
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import who


def _last_failed(state: RunState, ctx: Context) -> tuple[PodState, int | None] | None:
    """The replica that failed last, and its exit code: what made the operator restart the job."""
    failed = [
        (pod, end)
        for pod in state.pods.values()
        for end in terminations(pod, ctx)
        if end.exit_code not in (None, 0) or end.reason == "OOMKilled"
    ]
    if not failed:
        return None
    pod, end = max(failed, key=lambda item: (item[1].finished_at or item[0].changed_at, item[0].changed_at))
    return pod, end.exit_code


def _detect_restarting(state: RunState, ctx: Context) -> Detection | None:
    condition = state.restarting()
    if condition is None:
        return None
    since = condition.last_transition_time
    cause = _last_failed(state, ctx)
    after = ""
    if cause is not None:
        pod, code = cause
        after = f" after {who(pod)} exited" + (f" with code {code}" if code is not None else "")
    evidence = [job_fact(state, "status.conditions[Restarting].reason", condition.reason or "")]
    if condition.message:
        evidence.append(job_fact(state, "status.conditions[Restarting].message", condition.message))
    return Detection(
        root_cause=f"{state.ref.kind} {state.ref.name} is restarting{after}",
        evidence=tuple(evidence),
        key=(since.isoformat() if since else condition.reason or "restarting",),
    )


RESTARTING = Rule(
    id="restarting",
    kind="stall",
    severity="warning",
    summary="The operator is restarting the job after a replica failed (restartPolicy OnFailure or "
    "ExitCode, within runPolicy.backoffLimit); told once per restart.",
    remediation=(
        "See why the replica failed (the other findings of this run name it), and its previous log: "
        "kubectl -n {namespace} logs <pod> --previous",
        "Restarts count against runPolicy.backoffLimit: kubectl -n {namespace} get pytorchjob,tfjob,"
        "xgboostjob,paddlejob,jaxjob,mpijob {job} -o yaml shows the conditions and the limit.",
    ),
    detect=_detect_restarting,
)
