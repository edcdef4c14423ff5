"""Reading a log costs time linear in its length, whatever a workload prints.

Log tails and messages come from the workload, so a line may be 64 KiB of one character,
of hex, or of a prefix that almost matches a pattern, repeated. Python's ``re`` backtracks:
a pattern such as ``(?:[\\w.-]+@)?[\\w.-]+: Permission denied`` costs O(n²) on a long word.
Every compiled pattern of ``consumers.rules`` — found in the modules themselves, so a new
one cannot be forgotten — is fed adversarial lines of 4 KiB and 32 KiB; eight times the
input may cost at most ``MAX_RATIO`` times the time (linear is 8, quadratic 64). Timings
are the minimum of several runs of this thread's CPU time and compared as a ratio, never
against a wall clock; a ratio over the bound is measured again, up to ``MEASURES`` times, and
the least one counts (a busy machine can slow one measurement; a quadratic pattern is over the
bound every time). The readers, which also bound what they read, are held to the same ratio on
whole tails. One pattern object is often held in several places (a module's table and another
module that imports it): it is measured once, and each place's test asserts on that ratio.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from functools import _lru_cache_wrapper
from typing import Any

import pytest

import consumers.rules
from consumers.rules import errors, signatures, tails

SMALL, LARGE = 4 * 1024, 32 * 1024
MAX_RATIO = 16.0
TRIALS = 3
MEASURES = 3

# Prefixes that almost match some pattern; each is repeated to fill a line.
PARTIAL_MATCHES = (
    "ssh: connect to host ",
    "ssh: connect to host h port 22: ",
    "ssh: Could not resolve hostname ",
    "Permission denied (publickey",
    "a@b: ",
    "HYDU_sock_connect (",
    'HYDU_sock_connect (x): unable to connect from "',
    "HYDU_sock_write (",
    "connection to proxy 1 at host ",
    "Remote daemon: [[1,0],1] on node ",
    "process rank 1 with PID 2 on node ",
    "process rank 1 with PID 2 on node h exited on signal ",
    "MPI_ABORT was invoked on rank ",
    "application called MPI_Abort(",
    "Abort(1) on node 1 (rank ",
    "Fatal error in PMPI_",
    "Process name: [",
    "RANK 1 PID 2 RUNNING AT ",
    "KILLED BY SIGNAL: ",
    "rank 1 in job 1  h",
    "exit status of rank 1: ",
    "Primary job ",
    "elastic.multiprocessing.api:failed (exitcode: ",
    "rank : 1 (local_rank: ",
    "] exits with return code = ",
    "--local_rank=",
    "Traceback (most recent call last):",
    "ValueError",
    "a.",
    "Error:",
    "x(1).....: ",
    "[rank",
    "[1,",
    "[1] ",
    "NCCL WARN ",
    "NCCL WARN Net : Call to recv from ",
    "NCCL WARN Error: failed to extend /dev/shm/",
    "NET/IB : Got completion from peer ",
    "Watchdog caught collective operation timeout: WorkNCCL(",
    "[PG 1 Rank ",
    "gloo/transport/tcp/pair.cc:1] ",
    "UCX  ERROR ",
    "UCX  DIAG  ep x: error '",
    "pml_ucx.c:1  Error: ",
    "Transport retry count exceeded on ",
    "fi_cq_readerr: err: 1, prov_err: ",
    "NVRM: Xid (PCI:0000:01:00): 45, ",
    ".cu:1: k: block: [1,1,1], thread: [",
    "Caught signal 11 (",
    "Signal: ",
    "exited on signal ",
    'File "',
    " 1 0x1 ",
    "[host:1",
    "No space left on device: '",
    "unable to write to file </torch_",
    "Memory cgroup out of memory: Killed process 1 (",
    "System OOM encountered, victim process: ",
    "Killed process 1 (",
    "exceeded quota: q, requested: ",
    "exceeded quota: q, requested: a=1, used: ",
    "failed quota: q: must specify ",
    "cpu quota is 1, current usage is ",
    "maximum cpu usage per Container is 1, but ",
    " max limit to request ratio per Container is 1, but ",
    'pods "',
    "nodes are available: ",
    'image "',
    "Insufficient ",
    "oom-kill",
    "Fatal error in a: ",
    "MPID_nem_tcp_connpoll(1).",
    "mca_btl_tcp_frag_recv] mca_btl_tcp_frag_recv: ",
    "error polling HP CQ with status ",
    "IBV_WC_",
    "received signal SIG",
    "SIGSEGV",
    "NET/IB : Got completion from peer x with status=",
    "ENOSPC watch ",
    "may cause ",
    "libfabric:1:1::efa:",
    "PMIX ERROR: ",
    "[proxy:0:0@",
    "StatusCode.",
    " [missing ranks: 1, ",
    "Ranks 1, ",
    "ProcessGroupNCCL's watchdog got stuck for ",
    "NCCL WARN Last error",
    "Last enqueued NCCL work: 1, last completed NCCL work: ",
)


def _hex(n: int) -> str:
    rng = random.Random(n)
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


@functools.cache
def adversarial(n: int) -> tuple[str, ...]:
    """Lines of exactly ``n`` characters that a backtracking pattern chokes on (built once per size:
    the random hex alone costs more than searching it)."""
    fillers = ("a" * n, "A" * n, _hex(n), " " * n, "1" * n, ("a" * 63 + ".") * (n // 64), "-" * n)
    repeated = tuple((seed * (n // len(seed) + 1))[:n] for seed in PARTIAL_MATCHES)
    return fillers + repeated


def _patterns(value: object, depth: int = 0) -> Iterator[re.Pattern[str]]:
    if isinstance(value, re.Pattern):
        yield value
    elif depth > 4:
        return
    elif isinstance(value, tuple | list | set | frozenset):
        for item in value:
            yield from _patterns(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _patterns(key, depth + 1)
            yield from _patterns(item, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            yield from _patterns(getattr(value, field.name), depth + 1)


def every_pattern() -> dict[str, re.Pattern[str]]:
    """Every compiled pattern held at module level in ``consumers.rules``, by where it lives."""
    found: dict[str, re.Pattern[str]] = {}
    for info in pkgutil.iter_modules(consumers.rules.__path__):
        module = importlib.import_module(f"consumers.rules.{info.name}")
        for name, value in vars(module).items():
            for i, pattern in enumerate(_patterns(value)):
                if isinstance(pattern.pattern, str):
                    found.setdefault(f"{info.name}.{name}[{i}]", pattern)
    return found


PATTERNS = every_pattern()


def _cost(call: Callable[[], object]) -> float:
    """The least CPU time of this thread over several runs of ``call``, in seconds: what the
    search cost, not how long the machine (other test workers, other processes) kept it waiting."""
    best = float("inf")
    for _ in range(TRIALS):
        start = time.thread_time()
        call()
        best = min(best, time.thread_time() - start)
    return best


def least_ratio(large: Callable[[], float], small: Callable[[], float]) -> float:
    """``large() / small()``, measured again while over :data:`MAX_RATIO`; the least one."""
    least = float("inf")
    for _ in range(MEASURES):
        least = min(least, large() / small())
        if least < MAX_RATIO:
            break
    return least


def search_cost(pattern: re.Pattern[str], lines: Sequence[str]) -> float:
    return sum(_cost(lambda line=line: pattern.search(line)) for line in lines)


@functools.cache
def growth(pattern: re.Pattern[str]) -> float:
    """:func:`least_ratio` of searching ``pattern`` through the large adversarial lines against
    the small ones; measured once per pattern, wherever it is held."""
    small, large = adversarial(SMALL), adversarial(LARGE)
    return least_ratio(lambda: search_cost(pattern, large), lambda: search_cost(pattern, small))


def test_every_pattern_module_is_searched() -> None:
    modules = {name.split(".", 1)[0] for name in PATTERNS}

    assert {"tails", "signatures", "memory", "quota", "scheduling", "containers"} <= modules
    assert len(PATTERNS) > 100


@pytest.mark.parametrize("pattern", PATTERNS.values(), ids=PATTERNS.keys())
def test_pattern_cost_grows_linearly_with_the_line(pattern: re.Pattern[str]) -> None:
    ratio = growth(pattern)

    assert ratio < MAX_RATIO, f"{pattern.pattern!r}: 8x the input cost {ratio:.1f}x the time"


READERS: dict[str, Callable[[tuple[str, ...]], Any]] = {
    "gpu_oom_lines": tails.gpu_oom_lines,
    "comm_failures": tails.comm_failures,
    "rank_failures": tails.rank_failures,
    "last_error": tails.last_error,
    "own_error": errors.own_error,
    "transport_failures": signatures.transport_failures,
    "native_crashes": signatures.native_crashes,
    "gpu_errors": signatures.gpu_errors,
    "disk_full": signatures.disk_full,
    "kernel_oom": signatures.kernel_oom,
}


def _uncached(reader: Callable[[tuple[str, ...]], Any], tail: tuple[str, ...]) -> Callable[[], object]:
    def call() -> object:
        for cached in (reader, tails.bounded, tails.gpu_oom_lines, tails.last_exception):
            if isinstance(cached, _lru_cache_wrapper):
                cached.cache_clear()
        return reader(tail)

    return call


@pytest.mark.parametrize("reader", READERS.values(), ids=READERS.keys())
def test_reader_cost_stays_linear_on_whole_tails(reader: Callable[[tuple[str, ...]], Any]) -> None:
    small, large = adversarial(SMALL), adversarial(LARGE)

    ratio = least_ratio(lambda: _cost(_uncached(reader, large)), lambda: _cost(_uncached(reader, small)))

    assert ratio < MAX_RATIO, f"8x the input cost {ratio:.1f}x the time"


def test_long_lines_are_read_by_their_ends() -> None:
    line = "sigkill_handler] " + "x" * 100_000 + "] exits with return code = 1"

    (kept,) = tails.bounded((line,))

    assert len(kept) <= tails.MAX_LINE_CHARS + 3
    assert kept.endswith("exits with return code = 1")
    assert [f.code for f in tails.rank_failures((line,))] == [1]


def test_the_check_catches_the_publickey_pattern_that_was_quadratic() -> None:
    # The pattern tails.py (then logs.py) used before: an optional ``user@host: `` prefix of unbounded word runs.
    quadratic = re.compile(r"(?:(?:[\w.-]+@)?(?P<host>[\w.-]+): )?Permission denied \(publickey")
    small, large = ["a" * (SMALL // 8)], ["a" * (LARGE // 8)]  # 1 KiB and 8 KiB keep it quick

    ratio = least_ratio(lambda: search_cost(quadratic, large), lambda: search_cost(quadratic, small))

    assert ratio > MAX_RATIO
