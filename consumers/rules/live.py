"""Reading running jobs' output live: which stored lines are evidence for the rules.

The followers store every followed container's output on ``LOGS``
(:mod:`controller.bus.logstore`). The rules role reads it with its own durable
(:mod:`consumers.rules.logreader`) and passes each batch through :func:`scan`: the lines that
match a failure signature of the catalog — the very patterns the log-reading rules read a
failure-time tail with (:data:`SIGNS`) — are kept with the few lines that follow them in the
batch (:data:`CONTEXT_LINES`, the blocks some messages print over several lines), and each rank's
last line is noted. The prefilter is one RE2 set over every pattern: one pass per line, in
time linear in its length whatever it holds; only a line the set matches is looked at again to
name its signature.

A signature is *fatal* when its wording always means the process is going down — MPI_ABORT and
mpirun's or MPICH's account of a rank taken down, NCCL's watchdog timing out a collective
(PyTorch aborts the process after it), Horovod shutting down — and evidence otherwise: a CUDA
out-of-memory caught by a batch-size search, a retried NCCL connection, a warning naming a
signal are printed by runs that go on. What the rules make of each is said in
:mod:`consumers.rules.state` (``LiveText``) and ``docs/troubleshooting.md``.

More wordings are read for hangs, not failures (:mod:`consumers.rules.culprits`): PyTorch's
watchdog counters (``[PG 1 Rank 0] Timeout at NCCL work: 7753, last enqueued NCCL work: 7755,
last completed NCCL work: 7752.``, as quoted in hiyouga/LlamaFactory#6269; the same counters
follow ``Exception (either an error or timeout) detected by watchdog at work: …`` in
hiyouga/LlamaFactory#7396) and Horovod's stall inspector (``One or more tensors were submitted
to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks
…`` then ``Missing ranks:`` and one ``<rank>: [tensors]`` line per missing rank, as printed in
DEKHTIARJonathan/HVD_TF_Worker_Desync_BugReport).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import re2

from consumers.rules.families import LIVE_SIGNS
from consumers.rules.progress import last_steps
from consumers.rules.rendezvouslines import (
    BARRIER_RAISED,
    BARRIER_WAIT,
    INIT_FRAME,
    RENDEZVOUS_SIGNS,
    SERVER_FRAME,
    TF_SESSION,
)
from consumers.rules.signatures import (
    AZUREML_QUOTA,
    CRASHES,
    DISKS,
    GOOGLE_ML_QUOTA,
    GPU_ERRORS,
    KERNEL_OOM,
    PRINTED_REFUSAL,
    QUOTA_REFUSAL,
    SAGEMAKER_LIMIT,
    TRANSPORTS,
)
from consumers.rules.tails import (
    COMM_SIGNS,
    CUDA_THROWN_HEAD,
    GPU_OOM_SIGNS,
    MAX_LINE_CHARS,
    RANK_FAILURE_SIGNS,
    python_exception,
)
from controller.contract.events import MAX_MARKS_PER_READING, MAX_RANKS_PER_READING, LogMark, RankOutput
from controller.contract.logs import LogLine

__all__ = ["CONTEXT_LINES", "SIGNS", "Scan", "Sign", "scan"]

CONTEXT_LINES = 8
"""Lines kept after a matching line (a watchdog's counters, ``Missing ranks:`` and its list,
Open MPI's ``Process name`` / ``Exit code`` block)."""

NCCL_COUNTERS = re.compile(
    r"(?:(?:Timeout at NCCL work|detected by watchdog at work): (?P<work>\d{1,19}), l|L)"
    r"ast enqueued NCCL work: (?P<enqueued>-?\d{1,19}), last completed NCCL work: (?P<completed>-?\d{1,19})"
)
"""The watchdog's counters, after a timeout or (the flight recorder, torch 2.3 on) after ``Received a dump
signal due to a collective timeout from rank N …. Last enqueued NCCL work: E, last completed NCCL work: C.``
(torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp)."""
MONITORED_BARRIER = re.compile(
    r"Ranks? (?P<ranks>\d{1,7}(?:, \d{1,7}){0,63}) failed to pass monitoredBarrier in (?P<ms>\d{1,12}) ms"
)
"""torch.distributed.monitored_barrier naming the ranks that did not arrive (ProcessGroupGloo.cpp):
``[Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms``, with wait_all_ranks ``Ranks 1, 3 …``."""
WATCHDOG_STUCK = re.compile(r"ProcessGroup\w{2,10}'s watchdog got stuck for (?P<seconds>\d{1,9}) seconds")
"""torch's heartbeat monitor: the rank in the line's ``[PG … Rank N]`` prefix has a watchdog that stopped
moving — an NCCL / CUDA call hangs there (ProcessGroupNCCL.cpp)."""
HOROVOD_STALL = re.compile(r"waiting for remainder of ranks for more than \d{1,9} seconds")
"""The headline of Horovod's stall inspector in every version (the ranks follow in one of three formats,
:mod:`consumers.rules.culprits`)."""

ELASTIC_TIMER = re.compile(
    r"Reaping worker_pid=\[(?P<pid>\d{1,10})\]\. Expired timers: (?P<scopes>[^\n]{0,200})"
)
"""torch elastic's timer server (``torch/distributed/elastic/timer``) killing a worker process whose
``expires(after=…)`` scope ran out: it names the process (``Reaping worker_pid=[4242]. Expired timers:
['train_step']``), not its rank."""

_MPICH_ERROR_ABORT = re.compile(
    r"Abort\(-?\d{1,10}\)(?: on node \d{1,7})? \(rank \d{1,7} in comm \d{1,10}\): Fatal error in \w{1,60}: "
    r"(?:Other MPI error|Unknown error class)\s{0,4}$"
)
"""MPICH's (and Intel MPI's, Cray MPICH's) abort on the error of an MPI call, its generic class alone with no
error stack after it: the process is going down, and nothing it says is read as more than its abort."""
_FATAL_TRANSPORTS = frozenset({"nccl-timeout", "nccl-watchdog", "horovod-shutdown"})


@dataclass(frozen=True)
class Sign:
    """One pattern of the catalog: its ``<family>/<name>`` and whether it is fatal."""

    id: str
    pattern: re.Pattern[str]
    fatal: bool = False


def _catalog() -> tuple[Sign, ...]:
    signs: list[Sign] = [Sign("gpu-oom/oom", pattern) for _, pattern in GPU_OOM_SIGNS]
    # a CUDA wrapper's uncaught exception: its message, on the lines kept after it, may say out of memory
    signs += [Sign("gpu-oom/cuda-thrown", CUDA_THROWN_HEAD)]
    signs += [Sign(f"mpi-comm/{s.name}", s.pattern, s.name in _FATAL_TRANSPORTS) for s in TRANSPORTS]
    # MPICH's abort on a call's error, its class alone (``Abort(15) on node 3 (rank 3 in comm 0): Fatal error
    # in internal_Wait: Other MPI error``): the process is going down, whichever rule reads it at the end
    signs += [Sign("mpi-comm/mpi-error-abort", _MPICH_ERROR_ABORT, True)]
    signs += [Sign(f"mpi-comm/{kind}", pattern) for kind, pattern in COMM_SIGNS]
    signs += [Sign(f"mpi-comm/family-{name}", pattern) for name, pattern in LIVE_SIGNS]
    signs += [Sign(f"mpi-abort/{name}", pattern, fatal) for name, pattern, fatal in RANK_FAILURE_SIGNS]
    signs += [Sign(f"segfault/{s.name}", s.pattern) for s in CRASHES]
    signs += [Sign(f"gpu-error/{s.name}", s.pattern) for s in GPU_ERRORS]
    signs += [Sign(f"disk-full/{s.name}", s.pattern) for s in DISKS]
    signs += [Sign(f"oom/{s.name}", s.pattern) for s in KERNEL_OOM]
    signs += [Sign("rendezvous/missed", pattern) for pattern in RENDEZVOUS_SIGNS]
    # a frame where the processes meet: a bare connection failure raised under it is a missed rendezvous
    signs += [Sign("rendezvous/init-frame", INIT_FRAME)]
    # torchft's lighthouse started (its bind raised under it), and TensorFlow's master waiting for a task: the
    # rule reads them from the lines kept (the master's wait only where it repeats)
    signs += [Sign("rendezvous/server-frame", SERVER_FRAME), Sign("rendezvous/tf-session", TF_SESSION)]
    # the store barrier's progress line and the frame that raised after it: together, the barrier given up
    signs += [
        Sign("rendezvous/barrier-wait", BARRIER_WAIT),
        Sign("rendezvous/barrier-raised", BARRIER_RAISED),
    ]
    signs += [Sign("quota/refusal", QUOTA_REFUSAL), Sign("quota/google-ml", GOOGLE_ML_QUOTA)]
    signs += [Sign("quota/printed", PRINTED_REFUSAL), Sign("quota/sagemaker", SAGEMAKER_LIMIT)]
    signs += [Sign("quota/azureml", AZUREML_QUOTA)]
    signs += [Sign("hang/nccl-counters", NCCL_COUNTERS), Sign("hang/horovod-stall", HOROVOD_STALL)]
    signs += [Sign("hang/monitored-barrier", MONITORED_BARRIER), Sign("hang/watchdog-stuck", WATCHDOG_STUCK)]
    signs += [Sign("hang/elastic-timer", ELASTIC_TIMER)]
    return tuple(signs)


SIGNS: tuple[Sign, ...] = _catalog()
"""Every signature a live line is matched against, in the order the rules prefer them."""


def _compile_set(signs: Sequence[Sign]) -> re2.Set:
    options = re2.Options()
    options.max_mem = 64 << 20
    prefilter = re2.Set.SearchSet(options)
    for sign in signs:
        try:
            prefilter.Add(sign.pattern.pattern)
        except re2.error as exc:
            raise ValueError(f"signature {sign.id} is not an RE2 pattern: {sign.pattern.pattern!r}") from exc
    prefilter.Compile()
    return prefilter


_SET = _compile_set(SIGNS)


def sign_of(line: str) -> Sign | None:
    """The first signature of :data:`SIGNS` ``line`` matches (RE2 first, then the one named)."""
    matched: list[int] = _SET.Match(line[:MAX_LINE_CHARS])
    if not matched:
        return None
    return SIGNS[min(matched)]


@dataclass(frozen=True)
class Scan:
    """What one batch holds for the rules: evidence lines, when each rank last printed, how many
    evidence lines did not fit in one message."""

    marks: tuple[LogMark, ...]
    ranks: tuple[RankOutput, ...]
    left_out: int = 0


def _at(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


ERROR_LOOK_BACK = 40
"""Lines looked back from a launcher's account of a rank's end for the rank's own exception."""


def _ends_a_rank(sign: Sign) -> bool:
    return sign.fatal and sign.id.startswith("mpi-abort/")


def _rank_error_before(lines: Sequence[LogLine], index: int, following: int) -> LogLine | None:
    """The exception a rank raised just before the launcher's account of its end (``IndexError: …``
    above mpirun's ``Primary job terminated normally …``), not already kept as a line following an
    earlier signature: kept with the account, the verdict read live names the error the failure-time
    tail will name, and one failure stays one finding (not a second revision when the pod ends)."""
    start = max(0, index - ERROR_LOOK_BACK)
    kept_from = index - (CONTEXT_LINES + 1 - following) if following else index
    for n in range(index - 1, start - 1, -1):
        if python_exception(lines[n].text) is not None:
            return lines[n] if n < kept_from else None
    return None


def scan(lines: Sequence[LogLine]) -> Scan:
    """The signature lines of one batch with the lines following each, and each rank's last line.

    A launcher's account of a rank's end is kept with the exception the rank raised just before it
    (:func:`_rank_error_before`). A hang's own account (``hang/…``: a stall warning, watchdog
    counters, and the lines after them) is not output of the rank: Horovod repeats its stall
    warning every minute while the run is stuck, and that is no progress."""
    marks: list[LogMark] = []
    left_out = 0
    following = 0
    quiet = False
    last: dict[int | None, int] = {}
    for n, line in enumerate(lines):
        sign = sign_of(line.text)
        error = _rank_error_before(lines, n, following) if sign is not None and _ends_a_rank(sign) else None
        if sign is not None:
            following, quiet = CONTEXT_LINES + 1, sign.id.startswith("hang/")
        if not quiet or following == 0:
            last[line.rank] = max(line.ts, last.get(line.rank, 0))
        if following == 0:
            continue
        following -= 1
        if len(marks) >= MAX_MARKS_PER_READING:
            left_out += sign is not None
            continue
        marks.append(
            LogMark(
                at=_at(line.ts),
                rank=line.rank,
                signature=sign.id if sign is not None else None,
                fatal=sign is not None and sign.fatal,
                line=line.text[:MAX_LINE_CHARS],
            )
        )
        if error is not None and len(marks) < MAX_MARKS_PER_READING:
            marks.append(LogMark(at=_at(error.ts), rank=error.rank, line=error.text[:MAX_LINE_CHARS]))
    ranks = sorted(last.items(), key=lambda item: -item[1])[:MAX_RANKS_PER_READING]
    ranks.sort(key=lambda item: (item[0] is None, item[0] or 0))
    steps = last_steps(lines, last.keys())
    outputs = tuple(
        RankOutput(rank=rank, last_at=_at(ts), step=steps[rank][1], step_at=_at(steps[rank][0]))
        if rank in steps
        else RankOutput(rank=rank, last_at=_at(ts))
        for rank, ts in ranks
    )
    return Scan(tuple(marks), outputs, left_out)
