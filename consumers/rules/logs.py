"""Recognising failures in log tails: GPU out-of-memory, lost MPI peers, failed ranks.

The watcher attaches a bounded tail (a few dozen lines) of a container's log when it
ends in error, and the launcher's tail carries every rank's output (mpirun forwards it).
Three readers turn a tail into structured facts:

- :func:`gpu_oom_lines` — PyTorch / CUDA / cuBLAS / XLA out-of-memory errors, with the
  rank when the line carries an output tag (``[1,5]<stderr>:``, ``[rank5]:``, ``[5] ``);
- :func:`comm_failures` — the launcher could not reach or lost a worker: ssh refused,
  timed out, key rejected, host not resolved (OpenSSH); daemons not started or lost
  (Open MPI ORTE, PRRTE); Hydra could not connect (MPICH, Intel MPI);
- :func:`rank_failures` — a rank aborted (``MPI_ABORT``/``MPI_Abort``), was killed by a
  signal, or exited non-zero, with the host it ran on when the log names it.

Messages are matched on their stable wording across Open MPI 4/5, MPICH 4 and Intel MPI
2021; multi-line blocks (``Remote daemon: … on node X``, ``RUNNING AT X``) are read from
the few lines after the headline. Tails are immutable tuples, so results are cached.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

_CONTEXT_LINES = 10

# ------------------------------------------------------------------ GPU memory

_GPU_OOM = re.compile(
    r"CUDA out of memory|torch\.(?:cuda\.)?OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED"
    r"|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED: Out of memory"
)
_RANK_TAG = re.compile(r"^\s*\[(?:\d+,)?(\d+)\]<std(?:out|err)>:|^\s*\[rank(\d+)\]:|^\s*\[(\d+)\]\s")


@dataclass(frozen=True)
class GpuOom:
    """One out-of-GPU-memory line, and the rank that printed it if tagged."""

    line: str
    rank: int | None


@lru_cache(maxsize=512)
def gpu_oom_lines(tail: tuple[str, ...]) -> tuple[GpuOom, ...]:
    """Every line of ``tail`` reporting that GPU memory ran out."""
    return tuple(GpuOom(line, output_rank(line)) for line in tail if _GPU_OOM.search(line))


def output_rank(line: str) -> int | None:
    """The rank an output tag attributes ``line`` to, if any."""
    match = _RANK_TAG.search(line)
    if match is None:
        return None
    return int(next(group for group in match.groups() if group is not None))


# ------------------------------------------------------------ communication

CommKind = Literal[
    "refused", "timed-out", "no-route", "unresolved", "publickey", "hydra", "daemon-lost", "daemon-start",
    "bad-termination",
]  # fmt: skip

_COMM: tuple[tuple[CommKind, re.Pattern[str]], ...] = (
    ("refused", re.compile(r"ssh: connect to host (?P<host>\S+) port \d+: Connection refused")),
    (
        "timed-out",
        re.compile(r"ssh: connect to host (?P<host>\S+) port \d+: (?:Connection|Operation) timed out"),
    ),
    ("no-route", re.compile(r"ssh: connect to host (?P<host>\S+) port \d+: No route to host")),
    ("unresolved", re.compile(r"ssh: Could not resolve hostname (?P<host>[^\s:]+)")),
    ("publickey", re.compile(r"(?:(?:[\w.-]+@)?(?P<host>[\w.-]+): )?Permission denied \(publickey")),
    (
        "hydra",
        re.compile(
            r"HYDU_sock_connect.*?unable to (?:connect from \"[^\"]*\" to \"(?P<host>[^\"]+)\""
            r"|get host address for (?P<host_addr>[^\s(]+))"
        ),
    ),
    ("daemon-lost", re.compile(r"(?:ORTE|PRTE) has lost communication with (?:a )?remote daemon")),
    ("daemon-start", re.compile(r"(?:ORTE|PRTE) was unable to reliably start one or more daemons")),
    ("bad-termination", re.compile(r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")),
)
_REMOTE_DAEMON = re.compile(r"Remote daemon\s*:\s*\S+ on node (?P<host>\S+)")
_RUNNING_AT = re.compile(r"RUNNING AT (?P<host>\S+)")
_BAD_TERMINATION_RANK = re.compile(r"RANK \d+ PID \d+ RUNNING AT")


@dataclass(frozen=True)
class CommFailure:
    """The launcher could not reach, or lost, a peer."""

    kind: CommKind
    host: str | None
    lines: tuple[str, ...]


@lru_cache(maxsize=512)
def comm_failures(tail: tuple[str, ...]) -> tuple[CommFailure, ...]:
    """Every communication failure in ``tail``, in log order."""
    found: list[CommFailure] = []
    for i, line in enumerate(tail):
        for kind, pattern in _COMM:
            match = pattern.search(line)
            if match is None:
                continue
            failure = _comm_failure(kind, match, tail, i)
            if failure is not None:
                found.append(failure)
            break
    return tuple(found)


def _comm_failure(kind: CommKind, match: re.Match[str], tail: Sequence[str], i: int) -> CommFailure | None:
    host = match.groupdict().get("host") or match.groupdict().get("host_addr")
    if host is not None:
        return CommFailure(kind, host, (tail[i],))
    after = tail[i + 1 : i + 1 + _CONTEXT_LINES]
    if kind == "bad-termination":
        if any(_BAD_TERMINATION_RANK.search(line) for line in after):
            return None  # a named rank died: that is a rank failure, see rank_failures
        return _with_context(kind, tail[i], after, _RUNNING_AT)
    if kind == "daemon-lost":
        return _with_context(kind, tail[i], after, _REMOTE_DAEMON)
    return CommFailure(kind, None, (tail[i],))


def _with_context(
    kind: CommKind, headline: str, after: Sequence[str], host_at: re.Pattern[str]
) -> CommFailure:
    for line in after:
        match = host_at.search(line)
        if match is not None:
            return CommFailure(kind, match.group("host"), (headline, line))
    return CommFailure(kind, None, (headline,))


# -------------------------------------------------------------------- ranks

RankHow = Literal["aborted", "killed", "exited"]

_ABORT_OMPI = re.compile(r"MPI_ABORT was invoked on rank (?P<rank>\d+)")
_ABORT_MPICH = re.compile(r"application called MPI_Abort\([^,]+, (?P<code>-?\d+)\) - process (?P<rank>\d+)")
_SIGNALED_OMPI = re.compile(
    r"process rank (?P<rank>\d+) with PID \d+ on\s+node (?P<host>\S+) exited on signal (?P<signal>\d+)"
    r"(?: \((?P<name>[^)]+)\))?"
)
_NONZERO_OMPI = re.compile(r"exited with non-zero status")
_BAD_TERMINATION = re.compile(r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES")

_ERRORCODE = re.compile(r"(?:with errorcode|Errorcode:)\s*(?P<code>-?\d+)")
_RANK_NODE = re.compile(r"process rank (?P<rank>\d+) with PID \d+ on\s+node (?P<host>[^\s,]+)")
_PROCESS_NAME = re.compile(r"Process name:\s*\[(?:\[\d+,\d+\]|[^\],]*),(?P<rank>\d+)\]\]?")
_EXIT_CODE = re.compile(r"Exit code:\s*(?P<code>-?\d+)")
_RANK_AT = re.compile(r"RANK (?P<rank>\d+) PID \d+ RUNNING AT (?P<host>\S+)")
_KILLED_BY = re.compile(r"KILLED BY SIGNAL: (?P<signal>\d+)(?: \((?P<name>[^)]+)\))?")
_EXIT_STATUS = re.compile(r"EXIT (?:CODE|STATUS): (?P<code>-?\d+)")


@dataclass(frozen=True)
class RankFailure:
    """One rank that aborted, was killed, or exited non-zero."""

    rank: int
    how: RankHow
    code: int | None
    signal: str | None
    host: str | None
    lines: tuple[str, ...]


@lru_cache(maxsize=512)
def rank_failures(tail: tuple[str, ...]) -> tuple[RankFailure, ...]:
    """Every failed rank in ``tail``: aborts first, then in log order."""
    found: list[RankFailure] = []
    whole = " ".join(tail)
    for i, line in enumerate(tail):
        after = tail[i + 1 : i + 1 + _CONTEXT_LINES]
        failure = _rank_failure(line, after, whole)
        if failure is not None:
            found.append(failure)
    return tuple(sorted(found, key=lambda f: f.how != "aborted"))


def _rank_failure(line: str, after: Sequence[str], whole: str) -> RankFailure | None:
    """A failed rank announced on ``line``; details come from the lines ``after`` it, and
    the rank's host from anywhere in the tail (Open MPI prints it in a later block)."""
    block = " ".join((line, *after))
    if (match := _ABORT_OMPI.search(line)) is not None:
        rank = int(match.group("rank"))
        code = _search_int(_ERRORCODE, block, "code")
        host = _host_of(rank, _RANK_NODE, whole)
        return RankFailure(rank, "aborted", code, None, host, _lines(line, after, _ERRORCODE))
    if (match := _ABORT_MPICH.search(line)) is not None:
        rank = int(match.group("rank"))
        host = _host_of(rank, _RANK_AT, whole)
        return RankFailure(rank, "aborted", int(match.group("code")), None, host, (line,))
    if (match := _SIGNALED_OMPI.search(" ".join((line, *after[:1])))) is not None and "process rank" in line:
        signal = match.group("signal") + (f" ({match.group('name')})" if match.group("name") else "")
        return RankFailure(int(match.group("rank")), "killed", None, signal, match.group("host"), (line,))
    if _NONZERO_OMPI.search(line) and (name := _PROCESS_NAME.search(block)) is not None:
        rank = int(name.group("rank"))
        code = _search_int(_EXIT_CODE, block, "code")
        return RankFailure(rank, "exited", code, None, None, _lines(line, after, _PROCESS_NAME, _EXIT_CODE))
    if _BAD_TERMINATION.search(line) and (at := _RANK_AT.search(block)) is not None:
        killed = _KILLED_BY.search(block)
        signal = None
        if killed is not None:
            signal = killed.group("signal") + (f" ({killed.group('name')})" if killed.group("name") else "")
        how: RankHow = "killed" if killed is not None else "exited"
        code = _search_int(_EXIT_STATUS, block, "code")
        lines = _lines(line, after, _RANK_AT, _KILLED_BY, _EXIT_STATUS)
        return RankFailure(int(at.group("rank")), how, code, signal, at.group("host"), lines)
    return None


def _host_of(rank: int, pattern: re.Pattern[str], text: str) -> str | None:
    for match in pattern.finditer(text):
        if int(match.group("rank")) == rank:
            return match.group("host")
    return None


def _search_int(pattern: re.Pattern[str], text: str, group: str) -> int | None:
    match = pattern.search(text)
    return int(match.group(group)) if match is not None else None


def _lines(headline: str, after: Sequence[str], *patterns: re.Pattern[str]) -> tuple[str, ...]:
    """The headline plus the following lines that supplied details, as evidence."""
    return (headline, *(line for line in after if any(p.search(line) for p in patterns)))
