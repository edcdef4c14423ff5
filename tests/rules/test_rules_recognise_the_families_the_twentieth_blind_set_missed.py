"""The families the blind set of 2026-11-30l showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: glibc's
psiginfo, an IDE's run console and a native module's hand-written handler on the signal (``segfault``);
the DataLoader's own message on its worker's bus error (``disk-full``); nvidia-smi without its driver and a
device-side assert printed without its kernel's name (``gpu-error``); MPICH's simple PMI client and a
message truncated between ranks (``mpi-comm``); Hydra's banner on a process ended by SIGTERM (``mpi-abort``);
a connection reset while the c10d store is set up (``rendezvous``). Each near-miss names a family's words
without reporting its failure: a runbook's instruction, a class explained.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, rules_fired, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_SEGFAULT: dict[str, Wording] = {
    # glibc's psiginfo on a write to a read-only mapping (glibc signal/psiginfo.c, psiginfo-define.h)
    "psiginfo-invalid-permissions": (
        "Segmentation fault (Invalid permissions for mapped object [0x7f3c2a000000])",
        "segmentation fault",
        "PYTHONFAULTHANDLER",
        "other",
    ),
    # the same on SIGBUS's code for a page with no backing (glibc psiginfo-define.h, BUS_ADRERR)
    "psiginfo-bus-error-nonexistent-physical-address": (
        "Bus error (Nonexistent physical address [0x7ffd10000000])",
        "bus error",
        "/dev/shm",
        "other",
    ),
    # JetBrains' run console on macOS, where SIGBUS is signal 10 (PyCharm / CLion)
    "ide-exit-code-138-sigbus": (
        "Process finished with exit code 138 (interrupted by signal 10: SIGBUS)",
        "bus error",
        "/dev/shm",
        "other",
    ),
    # a native module's handler printing glibc's backtrace_symbols_fd frames after it (execinfo(3))
    "error-signal-11-backtrace-symbols": (
        "Error: signal 11:\n./solver(_Z7handleri+0x1d)[0x55c3e2a0b1d]\n/lib64/libc.so.6(+0x3e6f0)[0x7f2b1c43e6f0]",
        "segmentation fault",
        "PYTHONFAULTHANDLER",
        "other",
    ),
}

_DISK_FULL: dict[str, Wording] = {
    # the DataLoader's handler of its worker's SIGBUS, raised in the main process's traceback (pytorch/pytorch
    # torch/csrc/DataLoader.cpp)
    "dataloader-killed-by-bus-error-in-traceback": (
        '  File "/usr/lib/python3/site-packages/torch/utils/data/dataloader.py", line 1133, in _try_get_data\n'
        "    raise RuntimeError(f'DataLoader worker (pid(s) {pids_str}) exited unexpectedly') from e\n"
        "RuntimeError: DataLoader worker (pid 52310) is killed by signal: Bus error. It is possible that "
        "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
        "/dev/shm",
        "emptyDir",
        "pytorch",
    ),
}

_GPU_ERROR: dict[str, Wording] = {
    # nvidia-smi in a container whose node has no driver loaded (NVIDIA's driver README, "nvidia-smi")
    "nvidia-smi-no-driver-in-pod": (
        "+ nvidia-smi\nNVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure "
        "that the latest NVIDIA driver is installed and running.",
        "NVIDIA driver",
        "lsmod",
        "cuda",
    ),
    # CUDA's __assertfail as Windows builds print it, without the kernel's name (pytorch/pytorch IndexKernel.cuh)
    "device-assert-without-kernel-name-cuh": (
        "C:\\actions-runner\\_work\\pytorch\\aten\\src\\ATen\\native\\cuda\\IndexKernel.cuh:92: block: [12,0,0], "
        'thread: [64,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.',
        "device-side assert",
        "CUDA_LAUNCH_BLOCKING",
        "pytorch",
    ),
}

_MPI_COMM: dict[str, Wording] = {
    # MPICH's simple PMI client on a broken PMI_FD socket (pmodels/mpich src/pmi/simple/simple_pmiutil.c)
    "pmi-simple-write-line-get-appnum-broken-pipe": (
        "[cli_3]: write_line error; fd=9 buf=:cmd=get_appnum\n:\nsystem msg for write_line failure : Broken pipe",
        "PMI",
        "PMI_FD",
        "mpich",
    ),
    # Open MPI's fatal handler on a receive whose buffer was too small (open-mpi/ompi ompi/errhandler)
    "ompi-recv-mpi-err-truncate": (
        "[n1:4711] *** An error occurred in MPI_Recv\n[n1:4711] *** reported by process [2155479041,1]\n"
        "[n1:4711] *** on communicator MPI_COMM_WORLD\n[n1:4711] *** MPI_ERR_TRUNCATE: message truncated\n"
        "[n1:4711] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
        "[n1:4711] ***    and potentially your MPI job)",
        "MPI_ERR_TRUNCATE",
        "MPI_Get_count",
        "openmpi",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # Hydra's banner on a process a CI runner's or the kubelet's SIGTERM ended (pmodels/mpich
    # src/pm/hydra ui/mpich/utils.c)
    "hydra-bad-termination-exit-code-15": (
        "="
        * 83
        + "\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 9120 RUNNING AT gpu-node-7\n"
        "=   EXIT CODE: 15\n=   CLEANING UP REMAINING PROCESSES\n" + "=" * 83,
        "SIGTERM",
        "",
        "mpich",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # the store created by init_process_group's env:// handler (pytorch/pytorch torch/distributed/rendezvous.py)
    "create-c10d-store-connection-reset": (
        '  File "/opt/conda/lib/python3.11/site-packages/torch/distributed/rendezvous.py", line 189, in '
        "_create_c10d_store\n    return TCPStore(\nRuntimeError: Connection reset by peer",
        "reset while the store was being set up",
        "",
        "pytorch",
    ),
    # the process group's first barrier on the store (pytorch/pytorch torch/distributed/distributed_c10d.py)
    "store-based-barrier-connection-reset": (
        '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 446, in '
        "_store_based_barrier\n    worker_count = store.add(store_key, 0)\nRuntimeError: Connection reset by peer",
        "reset while the store was being set up",
        "",
        "pytorch",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "segfault": _SEGFAULT,
            "disk-full": _DISK_FULL,
            "gpu-error": _GPU_ERROR,
            "mpi-comm": _MPI_COMM,
            "mpi-abort": _MPI_ABORT,
            "rendezvous": _RENDEZVOUS,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


def test_a_store_reset_later_in_training_stays_the_meshs() -> None:
    """The store's client on a reset with no frame setting the store up (TCPStore.cpp's recvValue, torch 2.x's
    wording) stays mpi-comm: a store lost after the processes met."""
    text = (
        "[E1104 09:12:44.201 TCPStore.cpp:258] [c10d] recvValue failed on SocketImpl(fd=31, "
        "addr=[10.0.0.4]:51234, remote=[10.0.0.2]:29500): Connection reset by peer"
    )
    assert rules_fired(text, "mpi-comm", stack="pytorch") == {"mpi-comm"}


# a family's words named, not reported: a runbook's instruction, a class explained
_QUIET: dict[str, tuple[str, str]] = {
    # a runbook's header for an NCCL-free OOM page (an SRE playbook's wording)
    "use-this-playbook-when-cuda-oom": (
        "Use this playbook when a job fails with torch.OutOfMemoryError: CUDA out of memory.",
        "pytorch",
    ),
    # a runbook's step naming nvidia-smi's failure
    "follow-this-guide-if-nvidia-smi-fails": (
        "Follow this guide if NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        "cuda",
    ),
    # psiginfo's words explained, no crash reported
    "psiginfo-address-not-mapped-explained": (
        "'Segmentation fault (Address not mapped to object)' usually means a NULL pointer was dereferenced.",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
