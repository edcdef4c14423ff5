"""The families the blind set of 2026-11-30j showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: HIP's status
by number as a stream executor prints it (``gpu-oom``); cuda-gdb's exceptions by their scope (``gpu-error``);
the Intel Fortran runtime's severe error 174 and its traceback table (``segfault``); the c10d store's client
timeout with its address hidden, the store's error class named with a count or the run that hit it
(``rendezvous``); rdma-core's queue pair creation, UCX's retold retry count, Gloo's connection failing in any
language (``mpi-comm``); MPICH's internal abort after its own assertion (``mpi-abort``); ENOMEM as Python and
Intel Fortran raise it, the kubelet's memory eviction relayed into a log (``oom``); a person's first-person
report quoting the run's line (``disk-full``). Each near-miss names a family's words without reporting its
failure: a condition, a frequency judged, a class explained.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import (
    WORDING_ARGS,
    Entry,
    Wording,
    fires_saying,
    run_live,
    stays_quiet,
    wordings,
)

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_GPU_OOM: dict[str, Wording] = {
    # TensorFlow's ROCm stream executor with HIP's later status number, hipErrorOutOfMemory (ROCm/HIP
    # hip_runtime_api.h's hipError_t; tensorflow-upstream's rocm_driver.cc)
    "tf-rocm-driver-hip-error-2": (
        "2020-03-02 10:11:12.000001: E tensorflow/stream_executor/rocm/rocm_driver.cc:640] failed to allocate "
        "15.98G (17163091968 bytes) from device: hipError_t(2)",
        "ROCm",
        "batch size",
        "tensorflow",
    ),
}

_GPU_ERROR: dict[str, Wording] = {
    # cuda-gdb stopping on a lane's illegal address (CUDA-GDB user manual, its exception table)
    "cuda-gdb-lane-illegal-address": (
        "CUDA Exception: Lane Illegal Address\nThe exception was triggered at PC 0x555555a8c3d0",
        "illegal memory access",
        "compute-sanitizer",
        "cuda",
    ),
    # the same debugger on a warp's misaligned access (its ``Warp Misaligned Address``)
    "cuda-gdb-warp-misaligned-address": (
        "Thread 1 received signal CUDA_EXCEPTION_6, Warp Misaligned Address.",
        "misaligned",
        "CUDA_LAUNCH_BLOCKING",
        "cuda",
    ),
}

_SEGFAULT: dict[str, Wording] = {
    # ifort's runtime with a -traceback build: its table's first named routine (Intel Fortran compiler
    # documentation, run-time error 174 and the traceback's Image / PC / Routine / Line / Source columns)
    "forrtl-174-traceback-named-routine": (
        "forrtl: severe (174): SIGSEGV, segmentation fault occurred\n"
        "Image              PC                Routine            Line        Source\n"
        "wrf.exe            00000000021C3A5F  module_mp_thomps        1342  module_mp_thompson.f90\n"
        "wrf.exe            0000000001E0B7C2  solve_em_                 88  solve_em.f90",
        "in module_mp_thomps at module_mp_thompson.f90:1342",
        "-heap-arrays",
        "mpi",
    ),
    # a person's report of the same line in single quotes, in the present (the runtime's own wording)
    "we-keep-seeing-forrtl-174": (
        "After the restart we keep seeing 'forrtl: severe (174): SIGSEGV, segmentation fault occurred' on "
        "the second time step.",
        "Intel Fortran runtime",
        "ulimit -s unlimited",
        "mpi",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # the c10d store's client with its address redacted by the paste (pytorch/pytorch torch/csrc/distributed
    # /c10d/socket.cpp's client timeout)
    "client-socket-timeout-address-redacted": (
        "torch.distributed.DistNetworkError: The client socket has timed out after 900000ms while trying to "
        "connect to (MASTER_ADDR, MASTER_PORT).",
        "could not reach the c10d store within 900s",
        "MASTER_ADDR",
        "pytorch",
    ),
    # the store's error class named with the count that joined (c10d's TCPStore ``N/M clients joined``)
    "store-error-named-with-workers-count": (
        "Multi-node launch hangs then fails with DistStoreError (3/4 workers)",
        "not every rank joined",
        "MASTER_ADDR",
        "pytorch",
    ),
    # the network error class named with the run that hit it
    "network-error-named-while-initialising": (
        "DistNetworkError while initializing the process group on 2 nodes",
        "c10d store",
        "MASTER_ADDR",
        "pytorch",
    ),
}

_MPI_COMM: dict[str, Wording] = {
    # rdma-core's mlx5 provider creating an extended queue pair (linux-rdma/rdma-core providers/mlx5
    # verbs.c's ``create qp: failed on ibv_cmd_create_qp with %d``, its _ex2 call)
    "mlx5-create-qp-ex2-failed": (
        "mlx5: node17: create qp: failed on ibv_cmd_create_qp_ex2 with 95",
        "could not create a queue pair",
        "ibstat",
        "ucx",
    ),
    # ibv_wc_status_str()'s status retold without ``count`` (libibverbs' IBV_WC_RETRY_EXC_ERR)
    "transport-retry-exceeded-on-device": (
        "UCX run stopped: transport retry exceeded on mlx5_2:1/IB",
        "retries ran out",
        "ibstat",
        "ucx",
    ),
    # Gloo named with its connection failing, in English and in Chinese (pytorch/gloo transport/tcp)
    "gloo-connect-failed-english": (
        "Gloo connect failed on rank 3 after 30s",
        "Gloo could not connect",
        "NetworkPolicies",
        "gloo",
    ),
    # torch's watchdog over NCCL, then c10d's line as it takes the process down: the watchdog's line is the
    # verdict, its aftermath no timeout of c10d's own (pytorch/pytorch ProcessGroupNCCL.cpp)
    "nccl-watchdog-then-taking-the-process-down": (
        "[rank2]:[E ProcessGroupNCCL.cpp:563] [Rank 2] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=12, OpType=BROADCAST, Timeout(ms)=600000) ran for 600412 milliseconds before timing out.\n"
        "[rank2]:[E ProcessGroupNCCL.cpp:577] [Rank 2] Some NCCL operations have failed or timed out. Due to the "
        "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        "collective BROADCAST timed out after 10m",
        "",
        "pytorch",
    ),
    "gloo-connection-rejected-chinese": (
        "GLOO 连接被拒绝",
        "Gloo could not connect",
        "NetworkPolicies",
        "gloo",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # MPICH's device aborting after its own assertion, under -prepend-rank (pmodels/mpich
    # src/mpid/ch3/src/mpid_abort.c ``internal ABORT - process %d``, MPIR_Assert_fail's line)
    "mpich-assertion-internal-abort-prepended": (
        "Assertion failed in file src/mpid/ch4/netmod/ofi/ofi_init.c at line 1032: ret == 0\n"
        "[2] internal ABORT - process 2",
        "an assertion failed in src/mpid/ch4/netmod/ofi/ofi_init.c at line 1032",
        "",
        "mpich",
    ),
}

_OOM: dict[str, Wording] = {
    # Python's subprocess forking with no memory left (CPython's _posixsubprocess, errno 12)
    "python-fork-errno-12": (
        '  File "/usr/lib/python3.10/subprocess.py", line 1847, in _execute_child\n'
        "    self.pid = _posixsubprocess.fork_exec(\n"
        "OSError: [Errno 12] Cannot allocate memory",
        "out of memory",
        "",
        "other",
    ),
    # the Intel Fortran runtime's allocation failure (its run-time error 41)
    "forrtl-41-insufficient-virtual-memory": (
        "forrtl: severe (41): insufficient virtual memory",
        "out of memory",
        "",
        "mpi",
    ),
    # the kubelet's eviction before 1.21, relayed into a CI runner's log (kubernetes/kubernetes
    # pkg/kubelet/eviction's message)
    "kubelet-memory-eviction-relayed": (
        'pod "trainer-0" failed: The node was low on resource: memory. Container trainer was using 30Gi, '
        "which exceeds its request of 16Gi.",
        "out of memory",
        "",
        "kubernetes",
    ),
}

_DISK_FULL: dict[str, Wording] = {
    # a person's first-person report quoting CPython's OSError in code (errno 28, ENOSPC)
    "we-keep-getting-errno-28-backticked": (
        "We keep getting `OSError: [Errno 28] No space left on device` while the checkpoint is written.",
        "no space left on device",
        "df -h",
        "pytorch",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "gpu-oom": _GPU_OOM,
            "gpu-error": _GPU_ERROR,
            "segfault": _SEGFAULT,
            "rendezvous": _RENDEZVOUS,
            "mpi-comm": _MPI_COMM,
            "mpi-abort": _MPI_ABORT,
            "oom": _OOM,
            "disk-full": _DISK_FULL,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# a family's words named, not reported: a condition, a frequency judged, a class explained
_QUIET: dict[str, tuple[str, str]] = {
    # a question's condition quoting the runtime's line
    "if-i-get-forrtl-174": (
        "If I get 'forrtl: severe (174): SIGSEGV, segmentation fault occurred', should I raise the stack?",
        "mpi",
    ),
    # a design note judging how often Gloo's connection fails
    "gloo-connection-refused-judged-rare": (
        "A Gloo connection refused error is rare once GLOO_SOCKET_IFNAME is set.",
        "gloo",
    ),
    # the store's error class explained, no run named
    "diststoreerror-explained": (
        "DistStoreError is raised when the store cannot complete an operation in time.",
        "pytorch",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


def test_the_watchdogs_aftermath_seen_live_leaves_the_watchdogs_verdict_once() -> None:
    """c10d's line after the watchdog's, seen live, does not turn the verdict into a timeout of its own."""
    text = _MPI_COMM["nccl-watchdog-then-taking-the-process-down"][0]
    entry = Entry(id="t", file="t", stack="pytorch", where="log", reason=None, expect="mpi-comm", text=text)
    firing = [f for f in run_live(entry).changes if f.status == "firing" and f.rule == "mpi-comm"]
    assert len(firing) == 1
    assert "timed out after 10m" in firing[0].root_cause
