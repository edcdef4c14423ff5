"""A failed process's own error line: what it said went wrong, not that it exited.

"Exited with code 1" says *that* a rank or a pod failed; the line its output printed says
*why*. :func:`own_error` finds that line in a tail:

- the exception closing a Python traceback, of any type (not a launcher's wrapper such as
  ``ChildFailedError`` or ``CalledProcessError``; see :func:`consumers.rules.tails.last_exception`);
- else the last CUDA, cuDNN / cuBLAS, NCCL or MPI error line (``CUDA error: …``,
  ``CUDA_ERROR_…``, ``NCCL error in: …``, ``ncclInternalError``, ``Fatal error in PMPI_…``,
  ``MPI_ERR_…``, ``An error occurred in MPI_…``).

Given a rank, only the lines tagged with it count (under mpirun the launcher's tail carries
every rank's output, ``[1,0]<stderr>:``), so another rank's noise is not taken for the cause.
:func:`rank_error` looks for a failed rank's line across the run, so the answer does not
depend on which pod's event the rules judged first. Like every pattern of the package, these
start with a literal and use bounded quantifiers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from consumers.rules.facts import pod_text
from consumers.rules.state import PodState, RunState
from consumers.rules.tails import RankFailure, bounded, last_exception, output_rank, strip_tag
from consumers.rules.wording import short_host

_WRAPPERS = ("ChildFailedError", "CalledProcessError")
_TRACEBACK = "Traceback (most recent call last):"
_ANY_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]{0,200}(?::\s|$)")
_NATIVE_ERROR = re.compile(
    r"CUDA error: |CUDA_ERROR_[A-Z_]{1,60}|cudaError[A-Z]"
    r"|CUDNN_STATUS_[A-Z_]{1,60}|CUBLAS_STATUS_[A-Z_]{1,60}"
    r"|NCCL error|nccl(?:UnhandledCuda|Internal|System|Remote)Error|ncclInvalid(?:Usage|Argument)"
    r"|Fatal error in P?MPI_|MPI_ERR_[A-Z_]{1,40}|An error occurred in MPI_"
)


@lru_cache(maxsize=512)
def own_error(tail: tuple[str, ...], rank: int | None = None) -> str | None:
    """The error line of ``tail`` (of rank ``rank``'s tagged lines only, when given)."""
    lines = bounded(tail)
    if rank is not None:
        lines = tuple(line for line in lines if output_rank(line) == rank)
    exception = last_exception(lines) or _closing_line(lines)
    if exception is not None and not exception.split(":", 1)[0].endswith(_WRAPPERS):
        return exception
    native = next((line for line in reversed(lines) if _NATIVE_ERROR.search(line)), None)
    return strip_tag(native).strip() if native is not None else None


def _closing_line(lines: tuple[str, ...]) -> str | None:
    """The line closing the last traceback whatever the exception's type is called
    (``ShardMissing: …``): the first unindented line after its frames."""
    start = next((i for i in range(len(lines) - 1, -1, -1) if _TRACEBACK in lines[i]), None)
    if start is None:
        return None
    for line in lines[start + 1 :]:
        text = strip_tag(line).rstrip()
        if not text or text[0].isspace():
            continue
        return text if _ANY_EXCEPTION.match(text) else None
    return None


@dataclass(frozen=True)
class OwnError:
    """An error line and the pod whose output carried it."""

    pod: PodState
    line: str


def _ran_on(state: RunState, failure: RankFailure, reporter: PodState) -> PodState | None:
    """The pod a failed rank ran on: the reporter if it is a worker, else the host the log
    names, else worker ``rank // slotsPerWorker``."""
    if reporter.role != "launcher":
        return reporter
    workers = state.workers()
    if failure.host:
        short = short_host(failure.host)
        return next((w for w in workers if short in (w.name, w.node) or failure.host == w.node), None)
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    if slots and failure.rank is not None:
        return next((w for w in workers if w.index == failure.rank // slots), None)
    return None


def rank_error(
    state: RunState, failure: RankFailure, reporter: PodState, ended: list[PodState]
) -> OwnError | None:
    """The error line of a failed rank, wherever the run shows it.

    In order: the rank's own tagged lines in the reporter's tail (the launcher under
    mpirun), the pod the rank ran on, the reporter's whole tail, and — when the report
    names no rank — the pods that ended in error (``ended``, first ended first)."""
    places: list[tuple[PodState, int | None]] = []
    if failure.rank is not None:
        places.append((reporter, failure.rank))
    ran_on = _ran_on(state, failure, reporter)
    if ran_on is not None:
        places.append((ran_on, None))
    places.append((reporter, None))
    if failure.rank is None and failure.local_rank is None:
        places.extend((pod, None) for pod in ended)
    for pod, rank in places:
        line = own_error(pod_text(pod), rank)
        if line is not None:
            return OwnError(pod, line)
    return None
