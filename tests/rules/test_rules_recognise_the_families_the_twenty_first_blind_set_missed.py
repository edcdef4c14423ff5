"""The families the blind set of 2026-11-30m showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: Rust's std
and cargo on a child dead of the signal (``segfault``); ROCm's runtime aborting a hardware queue and a TPU
core halted (``gpu-error``); a Vulkan back end refused device memory and PyTorch over its memory fraction
(``gpu-oom``); Dask's nanny, YARN's NodeManager, containerd's TaskOOM event, the JVM's heap and the C++
runtime's std::bad_alloc (``oom``); Slurm's step daemon ending a step for a failed task, TACC's ibrun and
MPICH's PMI client aborting the job (``mpi-abort``). Each near-miss names a family's words without reporting
its failure: a person's question quoting a queue's refusal, a document showing a message's format under the
sentence that says where it is written, source code printing an error's text or commented out.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_SEGFAULT: dict[str, Wording] = {
    # Rust's std::process::ExitStatus as a build script or a runner prints it (library/std/src/sys/unix)
    "rust-std-exit-status-signal-11-core-dumped": (
        "Error: command failed: signal: 11 (SIGSEGV) (core dumped)",
        "segmentation fault",
        "PYTHONFAULTHANDLER",
        "other",
    ),
    # cargo's ProcessError on a bench binary dead of SIGBUS (cargo-util's process_error)
    "cargo-process-signal-7-sigbus": (
        "error: bench failed\n\nCaused by:\n  process didn't exit successfully: `target/release/deps/bench-3f1c` "
        "(signal: 7, SIGBUS: access to undefined memory)",
        "bus error",
        "/dev/shm",
        "other",
    ),
}

_GPU_ERROR: dict[str, Wording] = {
    # ROCclr's queue callback in a newer release, its clock and pid first (ROCm/clr rocdevice.cpp)
    "rocm-queue-aborting-illegal-instruction": (
        ":0:rocdevice.cpp:2984: 5219831212us: [pid:4411  tid:0x7f2e3c5ff700] Callback: Queue 0x7f2d40200000 "
        "Aborting with error : HSA_STATUS_ERROR_ILLEGAL_INSTRUCTION: The agent attempted to execute an illegal "
        "shader instruction. code: 0x102a",
        "hardware queue",
        "AMD_SERIALIZE_KERNEL",
        "other",
    ),
    # JAX on a TPU core that stopped with no compiler metadata to tell why (jax-ml/jax, PJRT's status)
    "jax-core-halted-no-compiler-metadata": (
        "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Core halted unexpectedly: No error message available "
        "as no compiler metadata was provided.",
        "TPU core halted",
        "libtpu",
        "jax",
    ),
}

_GPU_OOM: dict[str, Wording] = {
    # a Vulkan compute back end's result by its C name (vulkan_core.h's VkResult, as ncnn and whisper.cpp log it)
    "vulkan-vk-error-out-of-device-memory": (
        "vkAllocateMemory failed -2 VK_ERROR_OUT_OF_DEVICE_MEMORY",
        "Vulkan",
        "vulkaninfo",
        "other",
    ),
    # PyTorch's caching allocator over a fraction set on the second GPU (c10/cuda/CUDACachingAllocator.cpp)
    "pytorch-allocation-over-memory-fraction-device-1": (
        "RuntimeError: Allocation on device 1 would exceed allowed memory. (out of memory)\n"
        "Currently allocated     : 30.12 GiB\nRequested               : 2.00 GiB\n"
        "Device limit            : 31.74 GiB",
        "memory fraction",
        "set_per_process_memory_fraction",
        "pytorch",
    ),
}

_OOM: dict[str, Wording] = {
    # Dask's nanny in a newer release, the worker's address and pid named (dask/distributed nanny.py)
    "dask-nanny-worker-address-exceeded-memory-budget": (
        "2025-02-03 10:11:12,345 - distributed.nanny.memory - WARNING - Worker tcp://10.0.3.7:40123 "
        "(pid=4120) exceeded 95% memory budget. Restarting...",
        "memory budget",
        "memory_limit",
        "other",
    ),
    # Hadoop 3's NodeManager on a MapReduce container (ContainersMonitorImpl)
    "hadoop-container-running-beyond-physical-memory-limits": (
        "Container [pid=21433,containerID=container_1580812395000_0042_01_000007] is running 518401024B beyond "
        "the 'PHYSICAL' memory limit. Current usage: 2.5 GB of 2 GB physical memory used; 4.1 GB of 4.2 GB virtual "
        "memory used. Killing container.",
        "YARN's NodeManager",
        "memoryOverhead",
        "other",
    ),
    # containerd's CRI plugin in an older release, its event printed as a Go struct (containerd's cri events)
    "containerd-taskoom-go-struct": (
        'time="2021-06-01T08:00:01.123Z" level=info msg="TaskOOM event &TaskOOM{ContainerID:'
        '9f2c1e7b44a0d3,XXX_unrecognized:[],}"',
        "out of memory",
        "resources.limits.memory",
        "kubernetes",
    ),
    # the JVM's collector giving up on a Hadoop reducer (java.lang.OutOfMemoryError's other heap wording)
    "jvm-gc-overhead-limit-exceeded": (
        "2019-04-02 11:22:33,444 FATAL [main] org.apache.hadoop.mapred.YarnChild: Error running child : "
        "java.lang.OutOfMemoryError: GC overhead limit exceeded",
        "JVM's heap",
        "spark.executor.memory",
        "other",
    ),
    # the C++ runtime ending a solver whose allocation threw, under mpirun's rank tag
    "std-bad-alloc-rank-tagged": (
        "[1,3]<stderr>:terminate called after throwing an instance of 'std::bad_alloc'\n"
        "[1,3]<stderr>:  what():  std::bad_alloc",
        "std::bad_alloc",
        "catch throw",
        "other",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # slurmstepd cancelling a whole batch job for its failed task (Slurm's step manager, --kill-on-bad-exit)
    "slurm-job-cancelled-due-to-task-failure": (
        "slurmstepd: error: *** JOB 7741 ON cn042 CANCELLED AT 2025-03-02T10:11:12 DUE TO TASK FAILURE ***",
        "Slurm cancelled the step",
        "sacct",
        "other",
    ),
    # the step daemon naming the step by its StepId, as newer releases print it
    "slurmstepd-terminating-stepid-task-exit-code": (
        "slurmstepd: error: Terminating StepId=5512.0; task 3 exit code 2 exited without notification",
        "exited with code 2",
        "sacct",
        "other",
    ),
    # TACC's ibrun over Intel MPI on a job that ended with a code of its own
    "tacc-ibrun-mpi-job-exited-255": (
        "TACC:  Starting up job 3391044\nTACC:  Starting parallel tasks...\n"
        "TACC:  MPI job exited with code: 255",
        "exited with code 255",
        "idev",
        "mvapich",
    ),
    # MPICH2's simple PMI client on an invalid communicator (pmodels/mpich's simple_pmi.c, PMI_Abort)
    "mpich2-pmi-abort-invalid-communicator": (
        "In: PMI_Abort(1, Fatal error in PMPI_Comm_rank: Invalid communicator, error stack:)",
        "PMI client aborted the job",
        "",
        "mpich",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "segfault": _SEGFAULT,
            "gpu-error": _GPU_ERROR,
            "gpu-oom": _GPU_OOM,
            "oom": _OOM,
            "mpi-abort": _MPI_ABORT,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# a family's words named, not reported: a person's question about a queue's refusal, a format shown in a
# document, source code printing an error's text or commented out
_QUIET: dict[str, tuple[str, str]] = {
    # a person's question quoting Kueue's reason for not admitting a workload
    "question-quoting-kueue-insufficient-quota": (
        'Why does my workload show "insufficient quota for nvidia.com/gpu in flavor a100" when I haven\'t used '
        "the cluster queue yet?",
        "kubernetes",
    ),
    # a document showing the driver's Xid line as the format it is logged in
    "doc-xid-logged-by-driver-as-code-block": (
        "Each Xid is logged by the NVIDIA driver in the system log as\n```\n"
        "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n```",
        "cuda",
    ),
    # the same for the kernel's line on a segfault
    "doc-kernel-segfault-line-written-to-console-as": (
        "Kernel oops messages are written to the console as\n```\n[ 4120.331] python3[2210]: segfault at 0 "
        "ip 00007f2c1a2b3c4d sp 00007ffd0e1f2a30 error 4 in libtorch.so\n```",
        "other",
    ),
    # NCCL's IB transport's warning on a failed completion, commented out in its source (net_ib.cc's WARN)
    "source-commented-out-ib-completion-warn": (
        '  // WARN("NET/IB : Got completion with error %d, opcode %d, len %d, vendor err %d", wc.status, '
        "wc.opcode, wc.byte_len, wc.vendor_err);",
        "nccl",
    ),
    # a step cancelled by a person or its time limit: no task failed
    "slurm-step-cancelled-by-time-limit": (
        "slurmstepd: error: *** STEP 88.0 ON cn7 CANCELLED AT 2025-01-02T03:04:05 DUE TO TIME LIMIT ***",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
