"""Rules ``mpi-comm`` and ``mpi-abort``: the ranks could not talk, or one of them failed.

``mpi-comm``: communication between the ranks broke, whichever library carried it. At the
MPI level the launcher could not reach its workers or lost them (ssh, DNS, daemons, Hydra
proxies, an MPI error stack naming a connection); below it the collective library or the
fabric failed — NCCL (watchdog timeouts, ``ncclRemoteError``, ``ncclSystemError``, sockets,
InfiniBand, a ``/dev/shm`` too small for its shared-memory transport), Gloo, Horovod, UCX,
InfiniBand verbs, libfabric / aws-ofi-nccl — and, beyond those wordings, any line a known
library printed that says the mesh was refused, reset, unreachable, timed out, lost, aborted, could
not spawn or could not allocate transport memory (:mod:`consumers.rules.families`), with that
library's sentence and remediation. The sentence names the library and the usual
culprit: a NetworkPolicy or an injected service-mesh sidecar for refused or lost
connections, the SSH key Secret for a rejected key, pods not running or the headless Service
for unresolved names, the fabric for InfiniBand errors, the size of ``/dev/shm`` (and how to
enlarge it) for shared memory. Of several failures in one log the most telling is reported:
a too-small ``/dev/shm`` first, then ssh-level lines and launch failures (they say *why* a
daemon was lost, and come before the process manager's kill of the other ranks), then fabric and
socket errors, then a family message (refused, reset, unreachable, allocation), then the daemons
and generic transport errors (``ncclSystemError``, a bare ``UCX ERROR``), then a family message
that a peer timed out, closed or aborted, and last what only says that a peer went away — a
collective timeout, ``ncclRemoteError``, Horovod shutting down. For those the sentence
points at the peer when another pod of the run had already failed.

``mpi-abort``: the mesh was fine but a rank failed — called ``MPI_Abort``, was killed by a
signal, or exited non-zero, as mpirun / Hydra / MPD, torch elastic (``ChildFailedError``)
or the DeepSpeed launcher report it; or Open MPI aborted a process by itself for an MPI call made
before ``MPI_Init`` or after ``MPI_Finalize`` (``*** on a NULL communicator``, ``Local abort before
MPI_INIT completed``), which the sentence says. The sentence names the rank and the worker it ran on,
and the rank's own error line (a Python exception, a CUDA / NCCL / MPI error) wherever the
run shows it — the rank's tagged output in the launcher's tail, the pod it ran on, or the pods
that ended in error — so the sentence does not depend on which pod's event came first
(:func:`consumers.rules.errors.rank_error`). That line is part of the finding's key: a
log tail that arrives later republishes the finding with it.

Both are symptoms of a pod-level cause when there is one (an OOM kill, a segfault, a GPU
error, a full disk, an evicted pod, a lost node, …); the catalog lets those explain them
away, and ``mpi-comm`` explains ``mpi-abort``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from consumers.rules.catchall import exits
from consumers.rules.culprits import culprit
from consumers.rules.errors import rank_error
from consumers.rules.facts import ContainerEnd, pod_text, terminations
from consumers.rules.families import family_failures
from consumers.rules.families import remediation as family_remediation
from consumers.rules.families import verb as family_verb
from consumers.rules.rule import Context, Detection, Rule, container_fact, log_facts
from consumers.rules.signatures import Hit, is_peer_symptom, is_shared_memory, transport_failures
from consumers.rules.state import PodState, RunState, pod_order
from consumers.rules.tails import (
    CommFailure,
    CommKind,
    RankFailure,
    bounded,
    comm_failures,
    last_exception,
    rank_failures,
)
from consumers.rules.wording import (
    duration,
    host_label,
    listing,
    mention,
    rank_subject,
    short_host,
    signal_name,
)

_SSH_LEVEL: frozenset[CommKind] = frozenset(
    {"refused", "timed-out", "no-route", "unresolved", "ssh-closed", "publickey", "host-key", "hydra"}
)
_UNREACHABLE: frozenset[CommKind] = _SSH_LEVEL | {"daemon-lost", "daemon-start", "bad-termination"}

# kind -> (problem with hosts named, problem without hosts)
_PROBLEMS: dict[CommKind, tuple[str, str]] = {
    "refused": ("ssh to {hosts} refused", "ssh refused"),
    "timed-out": ("ssh to {hosts} timed out", "ssh timed out"),
    "no-route": ("no route to {hosts}", "no route to a worker"),
    "unresolved": ("cannot resolve {hosts}", "cannot resolve a worker's hostname"),
    "ssh-closed": ("ssh to {hosts} was closed by the remote side", "ssh was closed by the remote side"),
    "publickey": ("ssh to {hosts} rejected the key", "ssh rejected the key"),
    "host-key": (
        "ssh refused the host key of {hosts} (Host key verification failed)",
        "ssh refused the workers' host keys (Host key verification failed)",
    ),
    "hydra": ("cannot connect to {hosts}", "cannot connect to a worker"),
    "hydra-proxy": ("lost the Hydra proxy on {hosts}", "lost a Hydra proxy"),
    "hydra-write": ("lost the Hydra proxy on {hosts}", "lost a Hydra proxy"),
    "hydra-launch": (
        "Hydra on {hosts} could not create the processes it launches",
        "Hydra could not create the processes it launches",
    ),
    "daemon-lost": ("lost the MPI daemon on {hosts}", "lost a remote MPI daemon"),
    "daemon-start": ("MPI daemons did not start on {hosts}", "MPI daemons did not start on the workers"),
    "daemon-failed": (
        "the MPI daemon on {hosts} failed before it reached mpirun",
        "an MPI daemon failed after launch, before it reached mpirun",
    ),
    "mpi-error": ("a rank's MPI call failed on {hosts}", "a rank's MPI call failed"),
    "bad-termination": ("a process on {hosts} ended unexpectedly", "a process ended unexpectedly"),
}
_NETWORK_HINT = "check NetworkPolicies / sidecar injection"
_OFI = re.compile(r"\bOFI\b|libfabric|\bfi_\w{1,30}")
_OFI_HINT = "the libfabric (OFI) provider failed: check FI_PROVIDER and the fabric devices the pods get"
_HINTS: dict[CommKind, str] = {
    "publickey": "check the SSH key Secret mounted in launcher and workers",
    "host-key": "the launcher's ssh checks host keys it has no known_hosts for: set StrictHostKeyChecking no "
    "and UserKnownHostsFile /dev/null in the image's ssh_config",
    "unresolved": "check that the worker pods are running and the job's headless Service exists",
    "hydra-launch": "check the program's path and permissions on that host (the line above it in the log "
    "names execvp's error) and, for mpiexec's own launch, the launcher's ssh (or rsh) to it",
}

_LEVEL_SHM, _LEVEL_SSH, _LEVEL_FABRIC, _LEVEL_FAMILY, _LEVEL_MPI, _LEVEL_FAMILY_PEER, _LEVEL_PEER = range(7)
_GENERIC = frozenset({"nccl-system", "ucx-error"})
"""Signatures that only say *that* a transport failed: a family message saying how comes first, on
the same line or another."""
_AFTER_A_RANK = frozenset({"horovod-shutdown"})
"""What a library says *because* a rank exited (Horovod: "shut down … caused by an exception on one of
the ranks or … after one of the ranks finished execution"): where the process manager reports that
rank's exit, ``mpi-abort`` names it, and the shutdown (its ops aborted) is no cause of its own."""
_FAMILY_LEVELS: dict[str, int] = {
    "spawn": _LEVEL_SSH,  # a host where nothing could start: the first cause, before any cleanup
    "alloc": _LEVEL_FAMILY,
    "resource": _LEVEL_FAMILY,
    "handshake": _LEVEL_FAMILY,
    "connect": _LEVEL_FAMILY,
    "refused": _LEVEL_FAMILY,
    "reset": _LEVEL_FAMILY,
    "unreachable": _LEVEL_FAMILY,
    "timed-out": _LEVEL_FAMILY_PEER,
    "lost": _LEVEL_FAMILY_PEER,
    "aborted": _LEVEL_FAMILY_PEER,
    "stalled": _LEVEL_FAMILY_PEER,
    "completion": _LEVEL_FAMILY_PEER,
    "backend": _LEVEL_FAMILY_PEER,
    "trail": _LEVEL_FAMILY_PEER,
}
_FAMILY_PEER_VERBS = frozenset({"timed-out", "lost", "aborted", "stalled", "completion", "trail", "backend"})


@dataclass(frozen=True)
class _Comm:
    """One communication failure found in one pod's text, and how telling it is."""

    level: int
    pod: PodState
    mpi: CommFailure | None = None
    hit: Hit | None = None


def _candidates(state: RunState) -> list[_Comm]:
    found: list[_Comm] = []
    for pod in state.current_pods():
        text = pod_text(pod)
        for failure in comm_failures(text):
            found.append(_Comm(_LEVEL_SSH if failure.kind in _SSH_LEVEL else _LEVEL_MPI, pod, mpi=failure))
        # a rank's failed MPI call (``mpi-error``) says only *that* it failed: a family's reading of
        # the same lines says how, and comes first
        covered: set[str] = {line for f in comm_failures(text) if f.kind != "mpi-error" for line in f.lines}
        ranks_failed = rank_failures(text)
        covered |= {line for f in ranks_failed for line in f.lines}
        for hit in transport_failures(text):
            if hit.name in _AFTER_A_RANK and ranks_failed:
                covered.add(hit.line)  # Horovod shut down because that rank exited: the rank's failure
                continue  # is the cause, in whichever words the shutdown's line is read
            if hit.name not in _GENERIC:
                covered.add(hit.line)
            level = (
                _LEVEL_SHM
                if is_shared_memory(hit)
                else _LEVEL_PEER
                if is_peer_symptom(hit)
                else _LEVEL_MPI
                if hit.name in _GENERIC
                else _LEVEL_FABRIC
            )
            found.append(_Comm(level, pod, hit=hit))
        raw = bounded(text)
        aborted = _aborted_at(raw, rank_failures(text))
        live_only = set(pod.live_text) - set(pod.log_tail)
        for hit in family_failures(text):
            if family_verb(hit) == "stalled" and raw[hit.index] in live_only:
                continue  # a stall seen while the run goes on is a hang (``hang-progress`` names the rank)
            if raw[hit.index] not in covered and hit.index < aborted:
                found.append(_Comm(_FAMILY_LEVELS[family_verb(hit) or "lost"], pod, hit=hit))
    return found


def _aborted_at(raw: Sequence[str], failures: Sequence[RankFailure]) -> int:
    """Where a rank's ``MPI_Abort`` shows in ``raw`` (past the end if none): the process manager's
    messages after it (PMIx ``UNREACHABLE``, lost daemons) are its kill of the other ranks."""
    lines = {line for f in failures if f.how == "aborted" for line in f.lines}
    return next((i for i, line in enumerate(raw) if line in lines), len(raw))


def _peer_symptom(hit: Hit) -> bool:
    """Whether the failure typically means *another* rank died first."""
    return is_peer_symptom(hit) or family_verb(hit) in _FAMILY_PEER_VERBS


def _detect_comm(state: RunState, ctx: Context) -> Detection | None:
    candidates = _candidates(state)
    if not candidates:
        return None
    best = min(candidates, key=lambda c: (c.level, c.pod.role != "launcher", pod_order(c.pod)))
    if best.hit is not None:
        same = [c.hit for c in candidates if c.pod is best.pod and c.hit is not None]
        return _transport_comm(state, ctx, best.pod, best.hit, same)
    failures = [c.mpi for c in candidates if c.pod is best.pod and c.mpi is not None]
    return _mpi_comm(best.pod, failures)


def _mpi_comm(pod: PodState, failures: Sequence[CommFailure]) -> Detection:
    chosen = min(failures, key=lambda f: f.kind not in _SSH_LEVEL)
    kind = chosen.kind
    hosts = _hosts([f for f in failures if f.kind == kind]) or _hosts(failures)
    with_hosts, without_hosts = _PROBLEMS[kind]
    problem = with_hosts.format(hosts=listing(hosts)) if hosts else without_hosts
    if chosen.detail:
        problem += f" ({chosen.detail})" if kind == "hydra-write" else f": {chosen.detail}"
    hint = _HINTS.get(kind, _NETWORK_HINT)
    remediation = _COMM_REMEDIATION.get(kind)
    if kind == "mpi-error" and _OFI.search(chosen.detail or ""):
        hint, remediation = _OFI_HINT, _OFI_STEPS
    lead = "workers unreachable: " if kind in _UNREACHABLE else ""
    lines = [line for f in failures for line in f.lines]
    return Detection(
        root_cause=f"MPI communication failure — {lead}{problem}; {hint}",
        evidence=log_facts(pod, dict.fromkeys(lines)),
        key=(kind, *hosts),
        remediation=remediation,
    )


def _hosts(failures: Sequence[CommFailure]) -> list[str]:
    return list(dict.fromkeys(short_host(f.host) for f in failures if f.host))


# ------------------------------------------------------------------ transports

_WORK_FIELD = re.compile(r"(?P<key>OpType|Timeout\(ms\))=(?P<value>[^,]{1,40})")
_WC_STATUS: dict[str, str] = {
    "4": "local protection error",
    "5": "work request flushed",
    "10": "remote access error",
    "12": "transport retry counter exceeded",
    "13": "RNR retry counter exceeded",
}
_WC_NAMES: dict[str, str] = {  # ibv_wc_status names, as verbs users print them
    "LOC_PROT_ERR": "local protection error",
    "WR_FLUSH_ERR": "work request flushed",
    "REM_ACCESS_ERR": "remote access error",
    "RETRY_EXC_ERR": "transport retry counter exceeded",
    "RNR_RETRY_EXC_ERR": "RNR retry counter exceeded",
}
_SHM_FIX = "mount an emptyDir with medium: Memory at /dev/shm to enlarge it"


def _transport_what(hit: Hit) -> str:
    """The failure in plain words, with what the line adds (operation, device, reason)."""
    what = hit.signature.what
    if hit.name == "nccl-timeout":
        fields = {m.group("key"): m.group("value") for m in _WORK_FIELD.finditer(hit.group("work") or "")}
        op = fields.get("OpType", "").strip("_")
        ms = hit.group("ms")
        after = f" after {duration(int(ms) / 1000)}" if ms else ""
        device = "NPU" if hit.group("ccl") == "H" else "rank"
        return f"collective {op or 'operation'} timed out{after}: a peer {device} stopped taking part"
    if hit.name == "nccl-shm":
        size = hit.group("bytes")
        grow = f" (a segment could not grow to {int(size) / 2**20:.1f} MiB)" if size else ""
        return f"{what}{grow}; {_SHM_FIX}"
    if hit.name == "nccl-shm-bus":
        return f"{what}; {_SHM_FIX}"
    wc = hit.group("wc")
    if wc is not None:
        return f"{what} (IBV_WC_{wc}: {_WC_NAMES.get(wc, 'see ibv_wc_status')})"
    status = hit.group("status")
    if status is not None:
        return f"{what} (status {status}: {_WC_STATUS.get(status, 'see ibv_wc_status')})"
    detail = hit.group("detail") or hit.group("call") or hit.group("device")
    if hit.group("closed"):
        detail = "connection closed by remote peer"
    elif hit.name == "ucx-error" and detail and "): " in detail:
        detail = detail.split("): ", 1)[1]  # ``tcp_ep 0x… (state=CONNECTED): recv(42) failed: …``
    return f"{what}: {detail.strip()}" if detail else what


def _peer_failure(state: RunState, ctx: Context, pod: PodState) -> tuple[PodState, ContainerEnd] | None:
    """Another pod of the run that had already ended in error when ``pod`` reported the symptom."""
    own = [t for t in terminations(pod, ctx) if t.exit_code not in (None, 0)]
    until = own[0].finished_at if own else None
    ended = [
        (other, t)
        for other in state.current_pods()
        if other.uid != pod.uid
        for t in terminations(other, ctx)
        if t.exit_code not in (None, 0)
        and (until is None or t.finished_at is None or t.finished_at <= until)
        and not (pod.role == "launcher" and other.role == "launcher")
    ]
    ended.sort(
        key=lambda item: (item[1].finished_at is None, item[1].finished_at or ctx.now, pod_order(item[0]))
    )
    return ended[0] if ended else None


def _transport_comm(state: RunState, ctx: Context, pod: PodState, hit: Hit, same: Sequence[Hit]) -> Detection:
    subject = rank_subject(state, pod, hit.rank)
    what = _transport_what(hit)
    lines = list(dict.fromkeys(h.line for h in same))[:8]
    evidence = list(log_facts(pod, lines))
    peer = _peer_failure(state, ctx, pod) if _peer_symptom(hit) else None
    stopped = culprit(state, ctx) if _peer_symptom(hit) and peer is None else None
    if stopped is not None:
        what += f"; {stopped.words}"
        evidence.extend(stopped.evidence)
    if peer is not None:
        other, t = peer
        what += f"; {mention(other)} had already exited with code {t.exit_code} — look there first"
        evidence.append(container_fact(other, t.container, f"{t.field}.exitCode", t.exit_code))
        exception = last_exception(pod_text(other))
        if exception:
            evidence.extend(log_facts(other, [exception]))
    library = "HCCL, under torch_npu" if hit.group("ccl") == "H" else hit.signature.library
    if subject == "A rank":
        sentence = f"Communication failure ({library}): {what}"
    else:
        sentence = f"{subject}: communication failure ({library}) — {what}"
    return Detection(
        root_cause=sentence,
        evidence=tuple(evidence),
        key=(
            hit.name,
            pod.uid,
            *((peer[0].uid,) if peer is not None else ()),
            *(str(rank) for rank in (stopped.ranks if stopped is not None else ())),
        ),
        remediation=_transport_remediation(hit),
    )


def _transport_remediation(hit: Hit) -> tuple[str, ...]:
    if family_verb(hit) is not None:
        return family_remediation(hit)
    if is_shared_memory(hit):
        return _SHM_STEPS
    if (own := _OWN_TRANSPORT_STEPS.get(hit.name)) is not None:
        return own
    if hit.group("ccl") == "H":  # torch_npu's watchdog over HCCL: the stall is HCCL's, on Ascend NPUs
        return _HCCL_PEER_STEPS
    if is_peer_symptom(hit):
        return _PEER_STEPS
    if hit.name in (
        "nccl-ib", "nccl-ibv", "ucx-retry", "ib-completion", "openib-cq", "ibv-wc", "ucx-diag", "ucx-error",
        "ompi-ucx", "ibv-create-qp", "verbs-retry",
    ):  # fmt: skip
        return _FABRIC_STEPS
    if hit.name in ("nccl-ofi", "libfabric-cq"):
        return _OFI_STEPS
    return _SOCKET_STEPS


# ------------------------------------------------------------------------ ranks


def _where(state: RunState, failure: RankFailure, pod: PodState | None) -> str:
    """`` on worker-1``: from the host the log names, the pod it came from, or the rank and
    slotsPerWorker when mpirun forwarded it to the launcher."""
    if failure.host:
        return f" on {host_label(failure.host, state)}"
    if pod is not None and pod.role == "worker":
        return f" on worker-{pod.index}" if pod.index is not None else f" on {pod.name}"
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    return f" on worker-{failure.rank // slots}" if slots and failure.rank is not None else ""


def rank_sentence(state: RunState, failure: RankFailure, pod: PodState | None = None) -> str:
    """``Rank 5 on worker-1 aborted (exit 1)`` and its killed / exited variants."""
    if failure.rank is not None:
        subject = f"Rank {failure.rank}"
    elif failure.local_rank is not None:
        subject = f"Local rank {failure.local_rank}"
    else:
        subject = "A rank"
    subject += _where(state, failure, pod)
    if failure.how == "aborted":
        sentence = f"{subject} aborted" + (f" (exit {failure.code})" if failure.code is not None else "")
        return sentence + (f": {failure.detail}" if failure.detail else "")
    if failure.how == "killed":
        signal = failure.signal or "?"
        if signal.isdigit():
            signal += f" ({signal_name(int(signal))})"
        return f"{subject} was killed by signal {signal}"
    if failure.code is not None:
        return f"{subject} exited with code {failure.code}"
    if failure.detail:
        return f"{subject} exited {failure.detail}"
    return f"{subject} exited with a non-zero code" + (
        " and mpirun aborted the job" if failure.launcher == "Open MPI" else ""
    )


def _detect_abort(state: RunState, ctx: Context) -> Detection | None:
    found = [(pod, failures) for pod in state.current_pods() if (failures := rank_failures(pod_text(pod)))]
    if not found:
        return None
    found.sort(key=lambda item: item[0].role != "launcher")
    pod, failures = found[0]
    first = failures[0]
    sentence = rank_sentence(state, first, pod)
    error = rank_error(state, first, pod, [e.pod for e in exits(state, ctx)])
    evidence = log_facts(pod, dict.fromkeys(line for f in failures for line in f.lines))
    if error is not None:
        sentence += f": {error.line}"
        evidence = (*log_facts(error.pod, [error.line]), *evidence)
    return Detection(
        root_cause=sentence,
        evidence=tuple(dict.fromkeys(evidence)),
        key=(
            first.how,
            str(first.rank if first.rank is not None else ""),
            first.host or "",
            pod.uid,
            error.line if error is not None else "",
        ),
        remediation=_abort_steps(first),
    )


def _abort_steps(failure: RankFailure) -> tuple[str, ...] | None:
    """The launcher's own step before the rule's, where the launcher that ended the rank has tools of its
    own (``None``: the rule's steps)."""
    own = _LAUNCHER_STEPS.get(failure.launcher or "")
    return (*own, *MPI_ABORT.remediation) if own else None


_LAUNCHER_STEPS: dict[str, tuple[str, ...]] = {
    "Julia's Distributed": (
        "Julia's Distributed: a worker's process ended (the master printed 'Worker N terminated.'); its own "
        "output ('From worker N:' lines, or its pod's log) says why — an error outside a remote call, the "
        "kernel's OOM killer (kubectl -n {namespace} describe pod <pod>), or a signal. A pmap over it then "
        "fails with ProcessExitedException: pmap(...; retry_delays=ExponentialBackOff(n=3), "
        "on_error=...) retries elsewhere, and addprocs adds a worker back.",
    ),
    "XGBoost4J-Spark": (
        "XGBoost4J-Spark: the tracker's exit code only says a worker failed; the failed Spark task's own log "
        "(the Spark UI's failed stage, its executor's stderr) holds the worker's error. Each worker is a "
        "Spark task that must run at once with the others: num_workers no more than the executors' task "
        "slots (spark.task.cpus = nthread), or the training waits and fails.",
    ),
    "MPT": (
        "MPT: the rank it names called MPI_Abort, or left (returned from main, called exit) without "
        "MPI_Finalize; its own output above MPT's stack traceback says why. Set MPI_COREDUMP=FIRST and "
        "MPI_SIGTRAP to keep its state, MPI_CHECK_ARGS=1 to have MPT check each call's arguments.",
    ),
    "horovodrun": (
        "horovodrun (its Gloo launcher): the rank's own output above 'Process N exit with status code' says "
        "why it ended; a code over 128 is a signal (137: SIGKILL, from the kernel's OOM killer or the "
        "kubelet as a rule: kubectl -n {namespace} describe pod <pod> shows the container's last state). "
        "Rerun with horovodrun --verbose and HOROVOD_LOG_LEVEL=debug to see each rank's command.",
    ),
    "MVAPICH": (
        "MVAPICH (mpirun_rsh and its mpispawn on each host): the rank its child handler names ended first; "
        "its own output above says why (a signal 9: the OOM killer or the kubelet, 11: a crash). Rerun with "
        "MV2_DEBUG_SHOW_BACKTRACE=1 (and MV2_DEBUG_CORESIZE=unlimited) to have the rank print its stack.",
    ),
    "PALS": (
        "PALS (HPE Cray's mpiexec): the first rank it says died from a signal or exited non-zero is the "
        "cause, the later ones (signal 15, SIGTERM) were ended by PALS after it; that rank's own output "
        "above says why (signal 9: the OOM killer or the kubelet, 6: the program's abort, 11: a crash). "
        "Rerun with mpiexec --label (--line-buffer) to tag each line with its rank.",
    ),
    "Slurm": (
        "Slurm: the first task srun reports (srun: error: <node>: task N: Exited / Aborted) is the one that "
        "failed, the Terminated ones were ended after it; that task's own output says why. sacct -j <job> "
        "-o JobID,State,ExitCode,NodeList shows each step's end, and srun --kill-on-bad-exit=0 lets the "
        "others finish while you debug.",
    ),
    "ibrun": (
        "ibrun (TACC): the code is the first failed rank's; its own output above 'TACC: MPI job exited' says "
        "why (ibrun's own usage errors print there too). Rerun the same command in an idev session to see "
        "it, with the launcher's options checked against 'ibrun --help' on that system.",
    ),
    "OpenFOAM": (
        "OpenFOAM: a FOAM FATAL ERROR's message says what the solver refused (a parallel run on one "
        "processor: mpirun -np must equal numberOfSubdomains in system/decomposeParDict, after "
        "decomposePar, and the solver needs -parallel); a sigFpe stack is the solution diverging: check "
        "the Courant number and deltaT before it, the mesh (checkMesh) and the boundary conditions, and "
        "rerun with FOAM_SIGFPE=false only to see where NaNs appear.",
    ),
    "ALPS": (
        "ALPS (Cray's aprun): the first PE RANK it says exited on a signal is the cause (6: the program's "
        "abort, 8: a floating-point exception, 9: the OOM killer or a kill), and 'exit codes' over 128 are "
        "128 plus the signal; that rank's own output above says why. Rerun with aprun -e ATP_ENABLED=1 "
        "(module load atp) to have ATP print every rank's stack.",
    ),
    "gfortran": (
        "GNU Fortran: the 'Backtrace for this error' under the signal names the routine when the program is "
        "built with -g -fbacktrace; build with -ffpe-trap=invalid,zero,overflow to stop at the first bad "
        "operation, and check the inputs (a division by zero, an overflow) of that routine.",
    ),
    "Fujitsu MPI": (
        "Fujitsu MPI (plexec under pjsub): the rank it names called MPI_Abort; that rank's own output says "
        "why (mpiexec -std-proc <file> writes each rank's output to its own file), and the PLE message "
        "number is explained in the job operation software's messages manual. pjstat -H shows the job's "
        "end and its exit code.",
    ),
    "glibc": (
        "glibc: its malloc aborted the rank when it found the heap corrupted (a write past an array's end, a "
        "double free, a buffer freed while MPI or a library still used it); the free() is where it was "
        "found, not where it was written. Rerun that rank with MALLOC_CHECK_=3 (or under valgrind, or "
        "built with -fsanitize=address) to stop at the bad write, and check the buffer sizes passed to MPI "
        "calls.",
    ),
    "DeepSpeed": (
        "DeepSpeed's launcher: the subprocess that ended first is the cause, the ones it then killed are "
        "not; look above 'Killing subprocess' for that rank's traceback or 'exits with return code' (-9: "
        "the OOM killer or the kubelet, as a rule). Rerun with the deepspeed launcher's "
        "--enable_each_rank_log to keep each rank's output apart.",
    ),
    "Charm++": (
        "Charm++: the Reason line under 'Called CmiAbort' is the program's CkAbort or Charm++'s own check; "
        "the processor's stack traceback under it shows the call. Rerun with +bt_gdb or a debug build "
        "(-g, charmc -debug) to see the frames, and check the program's inputs at that call.",
    ),
}
"""The first step for a rank a launcher with its own tools ended, before the rule's general steps."""


_NETWORK_STEPS = (
    "Check that NetworkPolicies in {namespace} let the launcher reach the workers on port 22 and "
    "on the MPI ports: kubectl -n {namespace} get networkpolicy",
    "If a service mesh injects sidecars, turn injection off for MPI pods (for Istio the pod "
    'annotation sidecar.istio.io/inject: "false"): the proxy intercepts ssh and MPI traffic.',
    "Start the launcher only once workers are ready: spec.launcherCreationPolicy: WaitForWorkersReady.",
)
_COMM_REMEDIATION: dict[CommKind, tuple[str, ...]] = {
    "hydra-launch": (
        "Hydra could not create a process it launches (the ranks, on a proxy; the proxies, on mpiexec): the "
        "line before 'create process returned error' names execvp's error — a program or interpreter not in "
        "the worker image or not on its PATH, a file without execute permission, or a fork the pod's pids "
        "limit refused.",
        "Check the program's path and permissions on that host: kubectl -n {namespace} exec <worker pod> -- "
        "which <program>; launcher and workers should run the same image, and for mpiexec's own launch its "
        "ssh (-launcher ssh) must reach each worker.",
    ),
    "publickey": (
        "Check the SSH Secret the operator created for the job (kubectl -n {namespace} get secret "
        "{job}-ssh) is mounted in both launcher and workers with mode 0600.",
        "If the image overrides ~/.ssh or runs as another user, point sshd at the mounted key.",
    ),
    "host-key": (
        "ssh on the launcher refused the workers' host keys: mpi-operator mounts only the key pair and "
        "authorized_keys from the Secret {job}-ssh (read-only, no known_hosts), so the image must not "
        "check host keys.",
        "In the launcher image's /etc/ssh/ssh_config set, under Host *, StrictHostKeyChecking no and "
        "UserKnownHostsFile /dev/null — mpi-operator's base image (build/base/Dockerfile) does exactly this.",
        'Or pass the options to the launcher: mpirun --mca plm_rsh_args "-o StrictHostKeyChecking=no -o '
        'UserKnownHostsFile=/dev/null" (Open MPI); check with kubectl -n {namespace} exec <launcher pod> -- '
        "ssh -o BatchMode=yes <worker host> true.",
    ),
    "unresolved": (
        "Check the worker pods are Running: kubectl -n {namespace} get pods -l "
        "training.kubeflow.org/job-name={job}",
        "Check the job's headless Service exists and lists the workers: kubectl -n {namespace} "
        "get svc,endpoints {job}",
        "Start the launcher only once workers are ready: spec.launcherCreationPolicy: WaitForWorkersReady.",
    ),
}
_OWN_TRANSPORT_STEPS: dict[str, tuple[str, ...]] = {
    "perftest-completion": (
        "perftest: the status is ibv_wc_status's number (4: a local protection error, a memory region the "
        "HCA may not use; 5: flushed; 12: retries exceeded, the peer or link gone) and the syndrome the "
        "HCA's own code; rerun both ends with the same options (-d <device> -i <port> -x <GID index> for "
        "RoCE) and check the ports with ibstat / ibv_devinfo on each node.",
        "Check the link and the HCA: its counters (perfquery, ethtool -S for RoCE), the node's kernel log "
        "(dmesg | grep mlx5), and the same test between other nodes to find the one that fails.",
    ),
    "mlx5-cq-error": (
        "mlx5: a CQ error event means the HCA could not write a completion (syndrome 0x1: the queue "
        "overran, the program polled too slowly or sized it too small; 0x2: an access violation); see "
        "which process owns the queue (the program using the fabric) and its own error.",
        "Check the node's HCA and driver: dmesg | grep mlx5 for other events, the firmware and MLNX_OFED / "
        "rdma-core versions (ibv_devinfo), and whether the errors follow the node (cordon it) or the "
        "program (its completion queue sizes: FI_VERBS_* / UCX_RC_* tx and rx queue lengths).",
    ),
    "pami-cma": (
        "Spectrum MPI (PAMI): cross-memory attach needs the ranks on a node to be allowed to read each "
        "other's memory (ptrace permission: one user, kernel.yama.ptrace_scope=0, no container boundary "
        "between them); in containers run the node's ranks in one, or turn CMA off with "
        "PAMI_DISABLE_CMA=1.",
    ),
    "horovod-mismatch": (
        "Horovod's coordinator names what differs between the ranks (device, data type, shape or operation): "
        "every rank must submit the same collectives on the same tensors in the same order.",
        "Look for code that runs on some ranks only (a branch on the rank, a tensor left on the CPU on one "
        "rank, mixed precision on part of them), and set HOROVOD_LOG_LEVEL=debug to see each rank's "
        "requests.",
    ),
    "ompi-shmem-mmap": (
        "Open MPI's shared-memory segment lives in its session directory: give it room and a writable, local "
        "file system (mount a memory-backed emptyDir at /dev/shm or /tmp, or point "
        "OMPI_MCA_orte_tmpdir_base / PRTE_MCA_prte_tmpdir_base at one).",
        "Or choose where the segment goes with OMPI_MCA_shmem_mmap_backing_file_base_dir=/dev/shm, and check "
        "the directory's space: kubectl -n {namespace} exec <worker pod> -- df -h /dev/shm /tmp.",
    ),
    "mpi-truncate": (
        "Every rank must call the collective with the same count and datatype, and a receive must post a "
        "buffer as large as the message sent to it: compare the ranks' counts (MPI_Get_count on a "
        "status shows what arrived).",
        "Look for code that sizes a buffer from rank-local data (a partition, a split communicator), and run "
        "with MPICH's MPIR_CVAR_ERROR_CHECKING or Open MPI's --mca mpi_param_check 1 to name the call.",
    ),
    "mpi-proc-failed": (
        "A process of the communicator failed first: the rank the error names (or the first rank whose own "
        "output stops) died or lost its node; its log, and kubectl -n {namespace} describe pod on its worker "
        "(Last State, OOMKilled, the node's Events), say why.",
        "A program built for fault tolerance (ULFM: MPIX_Comm_shrink, MPIX_Comm_agree) must set an error "
        "handler other than MPI_ERRORS_ARE_FATAL on the communicator to recover; otherwise resubmit from the "
        "last checkpoint once the cause is fixed.",
    ),
    "nccl-truncate": (
        "Check every rank runs the same image and NCCL (NCCL_DEBUG=INFO prints each rank's NCCL version) "
        "with the same NCCL_* settings: kubectl -n {namespace} get pods -o jsonpath='{{..image}}' | grep "
        "{job}",
        "A leftover process of an earlier run (or another job on the node) may be connecting to this run's "
        "ports: check for other pods of {namespace} on the same nodes, and give each run its own "
        "MASTER_PORT.",
    ),
    "nccl-bootstrap-root": (
        "Check that each process gets its own rank and the same world size (RANK / LOCAL_RANK / WORLD_SIZE, "
        "or the launcher's --nproc_per_node and --nnodes on every node): a process started twice, or two "
        "launchers on one node, check in as the same rank.",
        "Give each run its own MASTER_PORT (and unique id): a leftover process of an earlier run, or another "
        "job on the node, may be checking in at this run's bootstrap root; kubectl -n {namespace} get pods "
        "-o wide | grep {job} shows what shares its nodes.",
    ),
    "pmi-simple": (
        "Start every rank with the mpiexec of the MPI the program was built with (mpichversion / "
        "mpiexec --version): a PMI-1 client under another process manager, or run without one, cannot write "
        "to PMI_fd.",
        "Check that mpiexec (Hydra's proxies) still runs on each worker while the ranks start, and that "
        "PMI_FD, PMI_RANK and PMI_SIZE reach the ranks (a wrapper that closes file descriptors or a Python "
        "launcher that imports mpi4py first breaks it).",
    ),
    "slurm-pmix": (
        "Slurm's mpi/pmix plugin talks between the nodes' slurmstepd processes: check their network and "
        "the plugin's settings (SLURM_PMIX_DIRECT_CONN, SLURM_PMIX_DIRECT_CONN_UCX, SLURM_PMIX_TIMEOUT) "
        "and the slurmd logs of the nodes the fence names.",
        "Make sure the MPI was built against the same PMIx as Slurm's mpi/pmix (srun --mpi=list), or launch "
        "with another --mpi plugin to confirm.",
    ),
}
"""A transport family's own steps, where its library says what to change."""
_SHM_STEPS = (
    "Mount a memory-backed emptyDir at /dev/shm in every worker template — volumes: "
    "[{{name: dshm, emptyDir: {{medium: Memory, sizeLimit: 16Gi}}}}], volumeMounts: "
    "[{{name: dshm, mountPath: /dev/shm}}]; a container's own /dev/shm is 64 MiB.",
    "The emptyDir is RAM and counts against the pod's memory limit: raise the limit by its size.",
    "Check the size the pods got: kubectl -n {namespace} exec <worker pod> -- df -h /dev/shm "
    "(NCCL_SHM_DISABLE=1 avoids /dev/shm at the cost of speed).",
)
_PEER_STEPS = (
    "Find the rank that failed first — its own error is the cause, the others time out waiting "
    "for it: kubectl -n {namespace} get pods -o wide | grep {job}; "
    "kubectl -n {namespace} logs <pod> --previous",
    "If no rank failed, one hung or the ranks diverged (a different order of collectives): dump the "
    "stacks (py-spy dump) or set TORCH_NCCL_TRACE_BUFFER_SIZE and NCCL_DEBUG=INFO to see where.",
    "A slow step that is not a hang (a long checkpoint, an evaluation on one rank) needs a longer "
    "timeout: torch.distributed.init_process_group(timeout=…).",
)
_HCCL_PEER_STEPS = (
    _PEER_STEPS[0],
    "If no rank failed, one hung or the ranks diverged: dump the stacks (py-spy dump) and read each "
    "rank's plog (ASCEND_GLOBAL_LOG_LEVEL=1, ~/ascend/log) for the HCCL op it waits in.",
    "A slow step that is not a hang needs a longer timeout: HCCL_EXEC_TIMEOUT (the device's wait on a "
    "task) and init_process_group(timeout=…) (the watchdog's), together; HCCL_CONNECT_TIMEOUT where ranks "
    "start far apart.",
)
_FABRIC_STEPS = (
    "Check the InfiniBand / RoCE fabric of the nodes involved (ibstat, ibv_devinfo, link errors): "
    "kubectl -n {namespace} get pods -o wide | grep {job} shows which nodes; ask the cluster admins.",
    "Check the pods get their RDMA devices (the RDMA device plugin's resources, IPC_LOCK) and that "
    "NCCL_IB_HCA / UCX_NET_DEVICES name devices that exist on every node.",
    "Set NCCL_DEBUG=INFO (or UCX_LOG_LEVEL=info) and retry; if the same node fails again, cordon it.",
)
_OFI_STEPS = (
    "Check the pods request the EFA / libfabric devices (e.g. vpc.amazonaws.com/efa) and that the "
    "aws-ofi-nccl plugin matches the NCCL and libfabric in the image.",
    "Set FI_LOG_LEVEL=warn and NCCL_DEBUG=INFO to see which provider and device failed; check "
    "FI_PROVIDER and the security group allowing all traffic between the nodes.",
)
_SOCKET_STEPS = (
    "Check that NetworkPolicies in {namespace} allow all TCP traffic between the job's pods (NCCL and "
    "Gloo use ephemeral ports): kubectl -n {namespace} get networkpolicy",
    "Pin the interface the ranks use (NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME=eth0) and turn off "
    'service-mesh sidecar injection for training pods (sidecar.istio.io/inject: "false").',
    "Set NCCL_DEBUG=INFO to see which connection failed.",
)

MPI_COMM = Rule(
    id="mpi-comm",
    kind="cause",
    severity="critical",
    summary="The ranks cannot talk to each other: ssh / MPI daemons or their launch, or NCCL, Gloo, Horovod, "
    "UCX, InfiniBand, libfabric, PMIx, gRPC or another library of the mesh failed.",
    remediation=_NETWORK_STEPS,
    detect=_detect_comm,
)

MPI_ABORT = Rule(
    id="mpi-abort",
    kind="cause",
    severity="critical",
    summary="A rank aborted, was killed by a signal, or exited with an error (MPI, torch elastic, "
    "DeepSpeed).",
    remediation=(
        "Read the failing rank's own error above the abort: kubectl -n {namespace} logs "
        "job/{job}-launcher (ranks' output is forwarded there; add --tag-output to see which rank).",
        "MPI_Abort is called by the program or its framework (e.g. Horovod) after an error; "
        "a rank killed by signal 9 without an OOM finding was killed from outside (preemption, kill -9).",
        "For torchrun / DeepSpeed, the rank's traceback is in the log of the pod that ran it: "
        "kubectl -n {namespace} logs <worker pod> --previous",
    ),
    detect=_detect_abort,
)
