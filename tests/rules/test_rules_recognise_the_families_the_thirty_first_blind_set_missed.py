"""The families the blind set of 2026-11-30w showed missing, and its false alarm, in other wordings than its own.

Each near-miss is a document's note on what a program does under a condition (``Note: if …, X will …``,
``Tip: when …, it may …``), the error quoted in inline code after it; a note that reports a run, the
program's line under it, still counts.

Each failure is a wording of its family written apart from the set's lines: a CUDA error a Rust program
panicked on (cudarc's ``DriverError``, candle's and burn's ``Cuda(Cublas(…))`` under ``called
`Result::unwrap()` on an `Err` value``, Rust's older ``panicked at '…'`` too: ``gpu-error``, ``gpu-oom``);
Windows' full disk (``disk-full``); MLX's ring backend, oneCCL's transport layer and NCCL's network plugin
(``mpi-comm``); hivemind's DHT and libp2p daemon failing to meet their swarm (``rendezvous``); MPICH's abort
before the world communicator is set up and a shell's report of a command SIGABRT ended (``mpi-abort``);
Kubernetes 1.0's LimitRanger (``quota``).
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, the replay's stack)

_NOTED: dict[str, tuple[str, str]] = {
    # a README's note on a full disk, the error in inline code
    "note-if-the-loader-will-fail": (
        "Note: if the dataset does not fit, the loader will fail with `OSError: [Errno 28] No space left on "
        "device`",
        "pytorch",
    ),
    # a guide's capitalised note, a GPU's memory
    "note-when-pytorch-will-raise": (
        "NOTE: When the GPU runs out of memory, PyTorch will raise `RuntimeError: CUDA out of memory. Tried to "
        "allocate 2.00 GiB`",
        "pytorch",
    ),
    # an emphasised tip, a bus error it may cause
    "tip-if-the-loader-may-crash": (
        "**Tip:** if /dev/shm is not mounted, the loader may crash with `Bus error (core dumped)`",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_NOTED.values()), ids=list(_NOTED))
def test_a_documents_conditional_note_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


_STILL_REPORTED: dict[str, tuple[str, RuleId, str, str, str]] = {
    # a note that reports the run, the shell's line under it
    "note-the-run-crashed": (
        "Note: the run on node 3 crashed:\nSegmentation fault (core dumped)",
        "segfault",
        "segmentation fault (SIGSEGV)",
        "Read the backtrace",
        "other",
    ),
    # MPICH's abort on a call's error stack in MPI_Init stays the mesh's, not a rank's abort
    "mpich-init-error-stack-is-the-mesh": (
        "Abort(1091087) (rank 0 in comm 0): Fatal error in PMPI_Init: Other MPI error, error stack:",
        "mpi-comm",
        "MPI_Init failed in the MPICH-family library",
        "MPIR_CVAR_DEBUG_SUMMARY",
        "mpich",
    ),
    # a shell's abort after std::bad_alloc stays the memory's
    "shell-abort-after-bad-alloc-is-memory": (
        "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc\n"
        "./run.sh: line 9: 5150 Aborted                 (core dumped) ./assembler -k 31",
        "oom",
        "std::bad_alloc",
        "bad_alloc",
        "linux",
    ),
}


@pytest.mark.parametrize(
    ("text", "rule", "said", "step", "stack"), list(_STILL_REPORTED.values()), ids=list(_STILL_REPORTED)
)
def test_a_report_beside_the_new_families_still_counts(
    text: str, rule: RuleId, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_GPU_ERROR: dict[str, Wording] = {
    # candle's error wrapping cudarc's, on a runtime worker's thread
    "candle-cuda-driver-error-illegal-address": (
        "thread 'tokio-runtime-worker' panicked at candle-core/src/cuda_backend/mod.rs:1211:9:\n"
        "called `Result::unwrap()` on an `Err` value: Cuda(DriverError(CUDA_ERROR_ILLEGAL_ADDRESS, "
        '"an illegal memory access was encountered"))',
        "illegal memory access",
        "CUDA_LAUNCH_BLOCKING=1",
        "cuda",
    ),
}


_GPU_OOM: dict[str, Wording] = {
    # Rust before 1.73, the payload quoted in the panic's line
    "rust-old-panic-cublas-alloc-failed": (
        "thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: "
        "Cuda(Cublas(CublasError(CUBLAS_STATUS_ALLOC_FAILED)))', src/train.rs:88:41",
        "cuBLAS could not allocate its workspace",
        "Lower the per-GPU batch size",
        "cuda",
    ),
    # cudarc's driver error for an allocation
    "cudarc-driver-error-out-of-memory": (
        "thread 'main' panicked at src/main.rs:40:10:\n"
        'called `Result::unwrap()` on an `Err` value: DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")',
        "CUDA out of memory",
        "Lower the per-GPU batch size",
        "cuda",
    ),
}


_DISK_FULL: dict[str, Wording] = {
    # Python on Windows, its WinError and the file
    "python-winerror-112": (
        "OSError: [WinError 112] There is not enough space on the disk: 'D:\\\\ckpt\\\\step_900.pt'",
        "Windows disk the program wrote to was full",
        "ERROR_DISK_FULL",
        "other",
    ),
    # .NET's IOException, the path after it
    "dotnet-ioexception-not-enough-space": (
        "Unhandled exception. System.IO.IOException: There is not enough space on the disk. : "
        "'C:\\\\data\\\\shard-0003.bin'",
        "Windows disk the program wrote to was full",
        "%LOCALAPPDATA%",
        "other",
    ),
}


_MPI_COMM: dict[str, Wording] = {
    # MLX's ring backend giving up on connecting to its neighbour
    "mlx-ring-couldnt-connect": (
        "[ring] Couldn't connect (error: 111)",
        "MLX's ring backend could not open its sockets",
        "MLX_RING_VERBOSE=1",
        "other",
    ),
    # its neighbour's connection reset, then its worker giving up
    "mlx-ring-recv-reset-too-many-errors": (
        "[ring] Receiving from socket 7 failed with errno 104\n[ring] Too many send/recv errors. Aborting...",
        "MLX's ring backend",
        "MLX_HOSTFILE",
        "other",
    ),
    # oneCCL's log line on libfabric finding no provider
    "oneccl-fi-getinfo-no-providers": (
        "2024:05:01-10:00:00:(4242) |CCL_ERROR| atl_ofi_helper.cpp:1050 atl_ofi_get_prov_list: fi_getinfo "
        "error: ret -61, providers 0",
        "could not open a network provider",
        "fi_info",
        "other",
    ),
    # the exception oneCCL raises into Python from its transport's start
    "oneccl-runtime-error-failed-to-initialize-atl": (
        "RuntimeError: oneCCL: atl_ofi_comm.cpp:95 init_transport: EXCEPTION: failed to initialize ATL",
        "oneCCL's transport",
        "FI_PROVIDER",
        "other",
    ),
    # NCCL_NET naming InfiniBand on a node without it
    "nccl-network-ib-not-found": (
        "gpu-node-2:311:402 [3] net.cc:571 NCCL WARN Error: network IB not found.",
        "NCCL could not find the network NCCL_NET names",
        "NCCL_DEBUG=INFO",
        "nccl",
    ),
}


_RENDEZVOUS: dict[str, Wording] = {
    # a Petals server's DHT, its traceback's last frame
    "petals-dhtnode-bootstrap-failed": (
        '  File "/opt/petals/server/server.py", line 212, in __init__\n'
        "    self.dht = DHT(initial_peers=initial_peers, start=True)\n"
        "RuntimeError: DHTNode bootstrap failed: none of the initial_peers responded to a ping. "
        "(set ensure_bootstrap_success=False to ignore)",
        "could not join its hivemind swarm",
        "initial_peers",
        "other",
    ),
    # the daemon's start timing out at another timeout
    "p2pdaemonerror-failed-to-start-in-15-seconds": (
        "hivemind.p2p.p2p_daemon_bindings.utils.P2PDaemonError: Daemon failed to start in 15.0 seconds",
        "libp2p daemon (p2pd)",
        "startup_timeout",
        "other",
    ),
    # the daemon's own last line, the class bare
    "p2pdaemonerror-bootstrap-peers-bare-class": (
        "P2PDaemonError: Daemon failed to start: 2024/11/02 08:15:44 failed to connect to bootstrap peers",
        "could not join its hivemind swarm",
        "announce_maddrs",
        "other",
    ),
}


_MPI_ABORT: dict[str, Wording] = {
    # the abort before MPI's world is set up, srun's label of its task before it
    "cray-mpich-abort-srun-labelled": (
        "5: Abort(-1) (rank 5 in comm 0): MPIDI_CRAY_init: GPU_SUPPORT_ENABLED is requested, but GTL library "
        "is not linked",
        "MPICH's device aborted it as MPI started (MPIDI_CRAY_init",
        "Read the failing rank's own error",
        "mpich",
    ),
    # a solver's uncaught exception, the shell running it by sh
    "shell-aborted-after-what": (
        "terminate called after throwing an instance of 'std::runtime_error'\n"
        "  what():  cannot open mesh file grid.msh\n"
        "/bin/sh: line 1: 4711 Aborted                 ./solver --steps 100",
        "what(): cannot open mesh file grid.msh",
        "Read the failing rank's own error",
        "linux",
    ),
}


_TABLES: dict[RuleId, dict[str, Wording]] = {
    "gpu-error": _GPU_ERROR,
    "gpu-oom": _GPU_OOM,
    "disk-full": _DISK_FULL,
    "mpi-comm": _MPI_COMM,
    "rendezvous": _RENDEZVOUS,
    "mpi-abort": _MPI_ABORT,
}


@pytest.mark.parametrize(WORDING_ARGS, wordings(_TABLES))
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


def test_kubernetes_1_0s_limit_ranger_is_a_limit_range_refusal() -> None:
    fires_saying(
        'Error creating deployer pod for shop/web-3: pods "web-3-deploy" is forbidden: Limited to 2Gi memory, '
        "but pod has no specified memory limit",
        "quota",
        "LimitRange allows at most 2Gi memory, but pod has no specified memory limit",
        "describe limitrange",
        stack="kubernetes",
        where="event",
        reason="failedCreate",
    )
