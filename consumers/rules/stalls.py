"""Time-based rules: a live run that should have moved on and has not.

- ``failure-propagation``: a worker pod failed ``failure_propagation_s`` ago, yet the job
  is not Failed — the operator did not notice, or a restart policy keeps the run alive
  without that worker.
- ``hang-pending``: Pending or Suspended longer than ``hang_pending_s``; says what the run
  is waiting for (Kueue admission, N GPUs, pods to be created or to start) and, for pods
  without a node, what the cluster autoscaler is doing about it.
- ``hang-init``: the launcher has been running for ``hang_init_s`` while not all workers
  are ready, so ``mpirun`` cannot build its mesh. A TrainJob whose runtime has no launcher
  (torchrun, JAX: every process runs on the worker pods) forms its mesh among the workers:
  it waits from the first worker Running until all are ready.
- ``hang-progress``: Running with no pod transition and no new log output for
  ``hang_progress_s``; it names the rank the run waits for where the output tells
  (:mod:`consumers.rules.culprits`). Only judged for runs whose watcher reports log output of running
  pods (``RunState.log_feed``): without that feed a quiet healthy job and a hung one look
  the same, and a rule that fires on every long job would be ignored.

Every duration is measured from timestamps in the state (the watcher's ``observed_at``)
to the injected ``now``. Stalls resolve as soon as the run moves on or finishes.
"""

from __future__ import annotations

from datetime import datetime

from consumers.rules.culprits import culprit
from consumers.rules.facts import pod_gpus, requested_gpus
from consumers.rules.rule import Context, Detection, Rule, job_fact, pod_fact
from consumers.rules.scheduling import autoscaler_answer
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, duration, listing, mention, quantity, who
from controller.contract.events import JobObserved
from controller.contract.findings import Evidence, Severity

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _detect_failure_propagation(state: RunState, ctx: Context) -> Detection | None:
    if state.job is None or state.phase == "Failed" or state.restarting() is not None:
        return None  # a restart is the operator acting on the failure
    limit = ctx.thresholds.failure_propagation_s
    failed = sorted(
        ((w.failed_since, w) for w in state.workers() if w.failed_since and ctx.age(w.failed_since) >= limit),
        key=lambda item: (item[0], item[1].index or 0),
    )
    if not failed:
        return None
    (since, first), others = failed[0], [w for _, w in failed[1:]]
    evidence = [pod_fact(w, "status.phase", w.phase) for _, w in failed]
    evidence.append(job_fact(state, "status.phase", state.phase))
    return Detection(
        root_cause=f"{who(first)} failed {duration(ctx.age(since))} ago but the job is "
        f"still {state.phase}{also(others)}",
        evidence=tuple(evidence),
        key=tuple(w.uid for _, w in failed),
    )


def waiting_for(state: RunState, job: JobObserved) -> tuple[str, Severity]:
    """What a Pending or Suspended run waits for, in words, and how worrying that is."""
    if job.phase == "Suspended" or job.spec.suspend:
        queue = job.labels.get(KUEUE_QUEUE_LABEL)
        if queue is None:
            return "spec.suspend is set, waiting to be resumed", "warning"
        gpus = requested_gpus(state)
        share = f", {quantity(gpus, 'GPU')}" if gpus else ""
        return f"waiting for Kueue admission (queue '{queue}'{share})", "info"
    pods = [p for p in state.current_pods() if not p.deleted]
    if not pods:
        return "no pods created yet", "warning"
    unplaced = [p for p in pods if not p.scheduled]
    if unplaced:
        gpus = sum(pod_gpus(state, p) for p in unplaced)
        what = quantity(gpus, "GPU") if gpus else f"{quantity(len(unplaced), 'pod')} to be scheduled"
        return f"waiting for {what}{_autoscaling(state, unplaced)}", "warning"
    starting = [mention(p) for p in pods if p.phase == "Pending"]
    if starting:
        return f"waiting for {listing(starting)} to start", "warning"
    return "waiting for the operator to mark it Running", "warning"


def _autoscaling(state: RunState, unplaced: list[PodState]) -> str:
    """What the cluster autoscaler does for the unplaced pods, as a clause, or ``""``."""
    verdicts = {a.verdict for p in unplaced if (a := autoscaler_answer(state, p)) is not None}
    if "backoff" in verdicts:
        return "; the cluster autoscaler's scale-up failed and is in back-off"
    if "adding" in verdicts:
        return "; the cluster autoscaler is adding nodes"
    return ""


def _detect_hang_pending(state: RunState, ctx: Context) -> Detection | None:
    if state.job is None or state.phase not in ("Pending", "Suspended") or state.phase_since is None:
        return None
    waited = ctx.age(state.phase_since)
    if waited < ctx.thresholds.hang_pending_s:
        return None
    what, severity = waiting_for(state, state.job)
    evidence = [
        job_fact(state, "status.phase", state.phase),
        job_fact(state, "phase since", state.phase_since.isoformat()),
    ]
    queue = state.job.labels.get(KUEUE_QUEUE_LABEL)
    if queue is not None:
        evidence.append(job_fact(state, f"metadata.labels[{KUEUE_QUEUE_LABEL}]", queue))
    return Detection(
        root_cause=f"{state.phase} {duration(waited)}: {what}",
        evidence=tuple(evidence),
        key=(state.phase or "", what),
        severity=severity,
    )


def _detect_hang_init(state: RunState, ctx: Context) -> Detection | None:
    since = state.mesh_wait_since
    if since is None or ctx.age(since) < ctx.thresholds.hang_init_s:
        return None
    launcher = state.launcher()
    workers = state.workers()
    starter = launcher or next((w for w in workers if w.phase == "Running" and not w.deleted), None)
    if starter is None or (launcher is None and not state.all_workers()):
        return None
    expected = max(state.expected_workers(), len(workers))
    ready = sum(1 for w in workers if w.ready)
    evidence: list[Evidence] = [pod_fact(starter, "status.phase", starter.phase)]
    evidence.extend(_not_ready_fact(w) for w in workers if not w.ready)
    if len(workers) < expected:
        evidence.append(job_fact(state, "worker pods", f"{len(workers)} of {expected} created"))
    mesh = "MPI mesh" if launcher is not None else "Process group"
    return Detection(
        root_cause=f"{mesh} not formed after {duration(ctx.age(since))}: {ready} of {expected} workers ready",
        evidence=tuple(evidence),
        key=(*(w.uid for w in workers if not w.ready), str(expected - len(workers))),
    )


def _not_ready_fact(pod: PodState) -> Evidence:
    waiting = next((c for c in pod.containers if c.state == "waiting" and c.reason), None)
    detail = f"{pod.phase}, {waiting.reason}" if waiting is not None else pod.phase
    return pod_fact(pod, "ready", f"False ({detail})")


def _detect_hang_progress(state: RunState, ctx: Context) -> Detection | None:
    if state.phase != "Running" or state.phase_since is None:
        return None
    if ctx.thresholds.progress_needs_log_feed and not state.log_feed:
        return None
    marks: list[tuple[str, datetime]] = [("status.phase Running since", state.phase_since)]
    if state.last_pod_change_at is not None:
        marks.append(("last pod change", state.last_pod_change_at))
    if state.last_log_at is not None:
        marks.append(("last new log output", state.last_log_at))
    idle = ctx.age(max(at for _, at in marks))
    if idle < ctx.thresholds.hang_progress_s:
        return None
    evidence = [job_fact(state, label, at.isoformat()) for label, at in marks]
    stopped = culprit(state, ctx)
    if stopped is None:
        sentence = f"No progress for {duration(idle)}: no pod changes and no new log output"
        return Detection(root_cause=sentence, evidence=tuple(evidence), key=("idle",))
    return Detection(
        root_cause=f"No progress for {duration(idle)}, no pod changes and no new log output: {stopped.words}",
        evidence=(*stopped.evidence, *evidence),
        key=("idle", *(str(rank) for rank in stopped.ranks)),
    )


FAILURE_PROPAGATION = Rule(
    id="failure-propagation",
    kind="stall",
    severity="warning",
    summary="A worker failed but the job did not fail with it.",
    remediation=(
        "Check the operator is running and reconciling: kubectl -n mpi-operator logs deploy/mpi-operator "
        "(or the Trainer controller for TrainJobs).",
        "Check the job's runPolicy / restart policy: a worker restart policy may keep the run "
        "alive without that worker, with the surviving ranks blocked in a collective.",
        "Delete the job if it cannot recover, so its GPUs are released: kubectl -n {namespace} "
        "delete mpijob {job}",
    ),
    detect=_detect_failure_propagation,
)

HANG_PENDING = Rule(
    id="hang-pending",
    kind="stall",
    severity="warning",
    summary="The job has been Pending or Suspended longer than the threshold.",
    remediation=(
        "For Kueue: kubectl -n {namespace} get workloads; kubectl describe workload <name> shows "
        "why it is not admitted (quota, flavors, priorities).",
        "For pods waiting for GPUs: see the unschedulable section; reduce workers or GPUs per worker.",
        "For a suspended job: resume it with kubectl -n {namespace} patch mpijob {job} --type merge "
        '-p \'{{"spec":{{"runPolicy":{{"suspend":false}}}}}}\'',
    ),
    detect=_detect_hang_pending,
)

HANG_INIT = Rule(
    id="hang-init",
    kind="stall",
    severity="warning",
    summary="The launcher (or, without one, the first worker) is running but not all workers are "
    "ready: the MPI mesh or process group cannot form.",
    remediation=(
        "List the workers that are not ready: kubectl -n {namespace} get pods -l "
        "training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=worker",
        "Check their readiness probes and that sshd starts: kubectl -n {namespace} logs <worker pod>.",
        "Start the launcher only once workers are ready: spec.launcherCreationPolicy: WaitForWorkersReady.",
    ),
    detect=_detect_hang_init,
)

HANG_PROGRESS = Rule(
    id="hang-progress",
    kind="stall",
    severity="warning",
    summary="The job is Running but nothing has changed and nothing was logged for a long time.",
    remediation=(
        "Look at the last output: kubectl -n {namespace} logs job/{job}-launcher --tail=50",
        "Dump the stacks of a stuck rank (py-spy dump --pid <pid> in a worker) — a rank blocked "
        "in a collective (allreduce, barrier) waits for a peer that died or diverged.",
        "Set NCCL_DEBUG=INFO and a collective timeout (e.g. torch.distributed timeout, "
        "NCCL_TIMEOUT) so a hang turns into an error.",
    ),
    detect=_detect_hang_progress,
)
