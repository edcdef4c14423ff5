"""Rules ``mpi-comm`` and ``mpi-abort``: what the launcher's log says about the MPI job.

``mpi-comm``: the launcher could not reach its workers or lost them — the MPI mesh broke
at the transport level (ssh, DNS, daemons). The sentence names the unreachable hosts and
the usual culprit: a NetworkPolicy or an injected service-mesh sidecar for refused or
lost connections, the SSH key Secret for a rejected key, pods not running or the
headless Service for unresolved names. An ssh-level line is preferred over the daemon
lines that follow it, because it says *why* the daemon was lost.

``mpi-abort``: the mesh was fine but a rank failed — called ``MPI_Abort``, was killed by a
signal, or exited non-zero. The sentence names the rank and the worker it ran on.

Both are symptoms of a worker-level cause when there is one (an OOM kill, an evicted
pod, a lost node, …); the catalog lets those explain them away.
"""

from __future__ import annotations

from collections.abc import Sequence

from consumers.rules.logs import CommFailure, CommKind, RankFailure, comm_failures, rank_failures
from consumers.rules.rule import Context, Detection, Rule, log_facts
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import host_label, listing, short_host

_SSH_LEVEL: frozenset[CommKind] = frozenset(
    {"refused", "timed-out", "no-route", "unresolved", "publickey", "hydra"}
)

# kind -> (problem with hosts named, problem without hosts)
_PROBLEMS: dict[CommKind, tuple[str, str]] = {
    "refused": ("ssh to {hosts} refused", "ssh refused"),
    "timed-out": ("ssh to {hosts} timed out", "ssh timed out"),
    "no-route": ("no route to {hosts}", "no route to a worker"),
    "unresolved": ("cannot resolve {hosts}", "cannot resolve a worker's hostname"),
    "publickey": ("ssh to {hosts} rejected the key", "ssh rejected the key"),
    "hydra": ("cannot connect to {hosts}", "cannot connect to a worker"),
    "daemon-lost": ("lost the MPI daemon on {hosts}", "lost a remote MPI daemon"),
    "daemon-start": ("MPI daemons did not start on {hosts}", "MPI daemons did not start on the workers"),
    "bad-termination": ("a process on {hosts} ended unexpectedly", "a process ended unexpectedly"),
}
_NETWORK_HINT = "check NetworkPolicies / sidecar injection"
_HINTS: dict[CommKind, str] = {
    "publickey": "check the SSH key Secret mounted in launcher and workers",
    "unresolved": "check that the worker pods are running and the job's headless Service exists",
}


def _launcher_tail(state: RunState) -> tuple[PodState, tuple[str, ...]] | None:
    launcher = state.launcher()
    if launcher is None or not launcher.log_tail:
        return None
    return launcher, launcher.log_tail


def _detect_comm(state: RunState, ctx: Context) -> Detection | None:
    found = _launcher_tail(state)
    if found is None:
        return None
    launcher, tail = found
    failures = comm_failures(tail)
    if not failures:
        return None
    kind = min(failures, key=lambda f: f.kind not in _SSH_LEVEL).kind
    hosts = _hosts([f for f in failures if f.kind == kind]) or _hosts(failures)
    with_hosts, without_hosts = _PROBLEMS[kind]
    problem = with_hosts.format(hosts=listing(hosts)) if hosts else without_hosts
    hint = _HINTS.get(kind, _NETWORK_HINT)
    lines = [line for f in failures for line in f.lines]
    return Detection(
        root_cause=f"MPI communication failure — workers unreachable: {problem}; {hint}",
        evidence=log_facts(launcher, dict.fromkeys(lines)),
        key=(kind, *hosts),
        remediation=_COMM_REMEDIATION.get(kind),
    )


def _hosts(failures: Sequence[CommFailure]) -> list[str]:
    return list(dict.fromkeys(short_host(f.host) for f in failures if f.host))


def _where(state: RunState, failure: RankFailure) -> str:
    """`` on worker-1`` from the host the log names, else from the rank and slotsPerWorker."""
    if failure.host:
        return f" on {host_label(failure.host, state)}"
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    return f" on worker-{failure.rank // slots}" if slots else ""


def rank_sentence(state: RunState, failure: RankFailure) -> str:
    """``Rank 5 on worker-1 aborted (exit 1)`` and its killed / exited variants."""
    subject = f"Rank {failure.rank}{_where(state, failure)}"
    if failure.how == "aborted":
        return f"{subject} aborted" + (f" (exit {failure.code})" if failure.code is not None else "")
    if failure.how == "killed":
        return f"{subject} was killed by signal {failure.signal}"
    return f"{subject} exited with code {failure.code}" if failure.code is not None else f"{subject} failed"


def _detect_abort(state: RunState, ctx: Context) -> Detection | None:
    found = _launcher_tail(state)
    if found is None:
        return None
    launcher, tail = found
    failures = rank_failures(tail)
    if not failures:
        return None
    first = failures[0]
    lines = [line for f in failures for line in f.lines]
    return Detection(
        root_cause=rank_sentence(state, first),
        evidence=log_facts(launcher, dict.fromkeys(lines)),
        key=(first.how, str(first.rank), first.host or ""),
    )


_NETWORK_STEPS = (
    "Check that NetworkPolicies in {namespace} let the launcher reach the workers on port 22 and "
    "on the MPI ports: kubectl -n {namespace} get networkpolicy",
    "If a service mesh injects sidecars, turn injection off for MPI pods (for Istio the pod "
    'annotation sidecar.istio.io/inject: "false"): the proxy intercepts ssh and MPI traffic.',
    "Start the launcher only once workers are ready: spec.launcherCreationPolicy: WaitForWorkersReady.",
)
_COMM_REMEDIATION: dict[CommKind, tuple[str, ...]] = {
    "publickey": (
        "Check the SSH Secret the operator created for the job (kubectl -n {namespace} get secret "
        "{job}-ssh) is mounted in both launcher and workers with mode 0600.",
        "If the image overrides ~/.ssh or runs as another user, point sshd at the mounted key.",
    ),
    "unresolved": (
        "Check the worker pods are Running: kubectl -n {namespace} get pods -l "
        "training.kubeflow.org/job-name={job}",
        "Check the job's headless Service exists and lists the workers: kubectl -n {namespace} "
        "get svc,endpoints {job}",
        "Start the launcher only once workers are ready: spec.launcherCreationPolicy: WaitForWorkersReady.",
    ),
}

MPI_COMM = Rule(
    id="mpi-comm",
    kind="cause",
    severity="critical",
    summary="The launcher cannot reach its workers, or lost them (ssh, DNS, MPI daemons).",
    remediation=_NETWORK_STEPS,
    detect=_detect_comm,
)

MPI_ABORT = Rule(
    id="mpi-abort",
    kind="cause",
    severity="critical",
    summary="An MPI rank aborted, was killed by a signal, or exited with an error.",
    remediation=(
        "Read the failing rank's own error above the abort: kubectl -n {namespace} logs "
        "job/{job}-launcher (ranks' output is forwarded there; add --tag-output to see which rank).",
        "MPI_Abort is called by the program or its framework (e.g. Horovod) after an error; "
        "a rank killed by signal 9 without an OOM finding was killed from outside (preemption, kill -9).",
    ),
    detect=_detect_abort,
)
