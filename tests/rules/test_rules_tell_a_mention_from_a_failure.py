"""A line that only names a failure word is not the failure; the line that reports it still is.

The corpus holds verbatim near-misses (``corpus/near_misses.yaml``, ``corpus/held_out``); these
pairs pin the distinction each reader draws, family by family: a signal handler banner or a
receipt of the signal, the inotify watch limit or a full disk, a handled write error or a fatal
one, a hint about illegal memory accesses or CUDA reporting one.
"""

from __future__ import annotations

import pytest

from consumers.rules.signatures import disk_full, gpu_errors, native_crashes


def _one(line: str) -> tuple[str, ...]:
    return (line,)


MENTIONS = {
    "segfault": [
        "faulthandler: installed handlers for SIGSEGV, SIGFPE, SIGABRT, SIGBUS and SIGILL",
        "Handler owners: SIGSEGV=/usr/lib/libfoo.so+0x12, SIGBUS=ddtrace",
        "hint: set PYTHONFAULTHANDLER=1 to get a Python stack on SIGSEGV",
    ],
    "disk-full": [
        "Error: ENOSPC: System limit for number of file watchers reached, watch '/app/src'",
        "{ [Error: watch ENOSPC] code: 'ENOSPC', errno: 'ENOSPC', syscall: 'watch' }",
        "inotify_add_watch failed: ENOSPC (raise fs.inotify.max_user_watches)",
        "WARNING upload of shard 3 failed: [Errno 28] No space left on device; retrying in 5s",
        "Exception ignored in: <_io.TextIOWrapper name='<stdout>'> OSError: [Errno 28] No space left on device",
    ],
    "gpu-error": [
        "WARNING: freeing this tensor during capture may cause illegal memory access on replay",
        "Set CUDA_LAUNCH_BLOCKING=1 if you see an illegal memory access was encountered in a kernel",
        "pad the buffer to 64 bytes to avoid illegal memory access in SIMD loads",
    ],
}
FAILURES = {
    "segfault": [
        "[rank3]: *** SIGSEGV (@0x0) received by PID 4242 (TID 0x7f00) from PID 0; stack trace: ***",
        "Signal 11 (SIGSEGV) received by PID 4242",
        "torch.multiprocessing: process 3 terminated with signal SIGSEGV",
        "worker exited: received signal SIGBUS",
    ],
    "disk-full": [
        "OSError: [Errno 28] No space left on device: '/ckpt/step_1000/model.pt'",
        "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 1024 vs 512; ENOSPC",
    ],
    "gpu-error": [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "cudaErrorIllegalAddress: an illegal memory access was encountered",
    ],
}
READERS = {"segfault": native_crashes, "disk-full": disk_full, "gpu-error": gpu_errors}


@pytest.mark.parametrize(
    ("rule", "line"),
    [(r, line) for r, lines in MENTIONS.items() for line in lines],
    ids=lambda v: str(v)[:40],
)
def test_a_line_that_only_names_the_failure_is_not_it(rule: str, line: str) -> None:
    assert READERS[rule](_one(line)) == ()


@pytest.mark.parametrize(
    ("rule", "line"),
    [(r, line) for r, lines in FAILURES.items() for line in lines],
    ids=lambda v: str(v)[:40],
)
def test_the_line_that_reports_the_failure_still_is(rule: str, line: str) -> None:
    assert len(READERS[rule](_one(line))) == 1
