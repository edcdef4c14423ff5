"""A line that names a failure, or an error the program caught and handled, names no cause.

In a run that failed for another reason, none of these may fire a specific rule (the catch-all
``failed`` alone may): a help text or tip that explains a failure, a configuration echo set *to
avoid* one, a helper stating it *will warn on* one, an error caught and followed by its handling
(the batch skipped, a smaller batch size tried, a fallback), a retry the library announces after
the failure. Each rule that reads texts gets near-misses of each kind, written here in words of
our own (the verbatim ones are in ``corpus/near_misses.yaml``); the same failure line without the
mention or the handling still fires.
"""

from __future__ import annotations

import pytest

from tests.rules.corpus_replay import Entry, run


def _entry(text: str, stack: str, expect: str | None) -> Entry:
    return Entry(id="t", file="t", stack=stack, where="log", expect=expect, text=text)  # type: ignore[arg-type]


# rule -> (stack, near-misses of that rule's words, the failure they must not hide)
NEAR_MISSES: dict[str, tuple[str, list[str], str]] = {
    "gpu-oom": (
        "pytorch",
        [
            "INFO config: PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 to avoid 'CUDA out of memory' on long "
            "sequences",
            "TIP: 'torch.OutOfMemoryError: CUDA out of memory' usually comes from a batch too large for one GPU",
            "step 420: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
            "WARNING caught the OOM, skipping this batch and freeing the cache\n"
            "step 421: loss 0.731",
            "autoscale: batch_size=512 -> CUDA out of memory\n"
            "autoscale: trying batch size 384\n"
            "autoscale: batch_size=384 fits",
            "tuner: OOM at 96 (CUDA error: out of memory)\ntuner: found optimal batch size 64",
        ],
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)",
    ),
    "disk-full": (
        "pytorch",
        [
            "INFO ckpt: /ckpt has 812 GiB free; will warn on 'No space left on device' below 2 GiB",
            "Hint: '[Errno 28] No space left on device' while saving usually means the PVC is too small",
            "UserWarning: [Errno 28] No space left on device: '/tmp/cache'. Falling back to the in-memory cache",
            "OSError: [Errno 28] No space left on device: '/scratch/tmp.bin'\n"
            "spill: scratch full, continuing without the disk cache",
        ],
        "OSError: [Errno 28] No space left on device: '/ckpt/step_1000/model.pt'",
    ),
    "gpu-error": (
        "pytorch",
        [
            "TIP: 'CUDA error: an illegal memory access was encountered' usually comes from an index out of "
            "range: rerun with CUDA_LAUNCH_BLOCKING=1",
            "INFO kernel guard on: pads every buffer to avoid 'an illegal memory access was encountered'",
            "custom_op: CUDA error: an illegal memory access was encountered\n"
            "custom_op: falling back to the reference implementation",
        ],
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ),
    "mpi-comm": (
        "nccl",
        [
            "pi-worker-1:42:99 [0] misc/socket.cc:600 NCCL WARN socketPollConnect to 10.0.2.9<45678> failed: "
            "Connection refused\n"
            "pi-worker-1:42:99 [0] NCCL INFO socketPollConnect: connect returned Connection refused, "
            "retrying (2/20)",
            "pi-worker-1:42:99 [0] NCCL INFO Call to connect returned Connection timed out, retrying",
            "libfabric:4242:1700000000::efa:core:efa_prov_info():99<warn> A missing security group rule may "
            "cause Connection timed out",
        ],
        "pi-worker-1:42:99 [0] misc/socket.cc:600 NCCL WARN socketPollConnect to 10.0.2.9<45678> failed: "
        "Connection refused",
    ),
    "segfault": (
        "pytorch",
        [
            "TIP: 'Segmentation fault (core dumped)' at import usually comes from a wheel built for another CUDA",
            "INFO entrypoint: ulimit -c unlimited set to avoid losing the core dump on a SIGSEGV",
            "faulthandler: installed handlers for SIGSEGV, SIGFPE, SIGABRT, SIGBUS and SIGILL",
        ],
        "Fatal Python error: Segmentation fault",
    ),
    "mpi-abort": (
        "openmpi",
        [
            "TIP: 'MPI_ABORT was invoked on rank 0' usually means the program called MPI_Abort after its "
            "own error",
            "INFO launch: --mca orte_abort_on_non_zero_status 1 set to avoid 'mpirun noticed that process "
            "rank 1 exited on signal 9' hiding the first error",
            "INFO watchdog: will warn on 'MPI_ABORT was invoked on rank N' and keep every rank's log",
        ],
        "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD\nwith errorcode 1.",
    ),
    "oom": (
        "linux",
        [
            "TIP: 'Out of memory: Killed process' in dmesg usually means the container's limit is too low",
            "INFO memwatch: will warn on 'Memory cgroup out of memory' above 90% of the limit",
            "INFO set vm.overcommit_memory=2 to avoid 'Out of memory: Killed process' on the nodes",
        ],
        "Memory cgroup out of memory: Killed process 4242 (python) total-vm:81234567kB, anon-rss:62345678kB",
    ),
    "rendezvous": (
        "pytorch",
        [
            "[W socket.cpp:663] [c10d] The client socket has timed out after 60s while trying to connect to "
            "(pi-master-0, 29500).\n"
            "[I socket.cpp:787] [c10d] retrying to connect to pi-master-0:29500\n"
            "[I socket.cpp:787] [c10d] The client socket has connected to [pi-master-0]:29500 on "
            "[pi-worker-1]:40000.",
            "TIP: 'RendezvousTimeoutError' usually means a node never started: check every replica runs",
            "INFO rdzv: --rdzv-conf timeout=900 set to avoid 'connect() timed out. Original timeout was 60000 "
            "ms.' on slow pulls",
        ],
        "[E socket.cpp:860] [c10d] The client socket has timed out after 60s while trying to connect to "
        "(pi-master-0, 29500).",
    ),
}


@pytest.mark.parametrize(
    ("rule", "stack", "text"),
    [(rule, stack, text) for rule, (stack, texts, _) in NEAR_MISSES.items() for text in texts],
    ids=lambda v: str(v)[:40],
)
def test_a_mention_or_a_handled_error_in_a_failed_run_names_no_cause(
    rule: str, stack: str, text: str
) -> None:
    assert run(_entry(text, stack, None)).rules <= {"failed"}
    assert run(_entry(text, stack, None), succeed=True).rules == frozenset()


@pytest.mark.parametrize(
    ("rule", "stack", "text"),
    [(rule, stack, failure) for rule, (stack, _, failure) in NEAR_MISSES.items()],
    ids=NEAR_MISSES.keys(),
)
def test_the_same_failure_unhandled_still_names_its_rule(rule: str, stack: str, text: str) -> None:
    assert rule in run(_entry(text, stack, rule)).rules


def test_a_retry_the_line_only_hedges_is_still_the_failure() -> None:
    text = (
        "2026-01-02 03:04:05.000001: W 42 tensorflow/core/distributed_runtime/rpc/grpc_remote_worker.cc:99] RPC "
        'failed with status = "Unavailable: Connection reset by peer", maybe retrying the RPC'
    )

    assert "mpi-comm" in run(_entry(text, "tensorflow", "mpi-comm")).rules
