"""The families the blind set of 2026-11-30m showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: Rust's std
and cargo on a child dead of the signal (``segfault``); ROCm's runtime aborting a hardware queue and a TPU
core halted (``gpu-error``); a Vulkan back end refused device memory and PyTorch over its memory fraction
(``gpu-oom``); Dask's nanny, YARN's NodeManager, containerd's TaskOOM event, the JVM's heap and the C++
runtime's std::bad_alloc (``oom``); Slurm's step daemon ending a step for a failed task, TACC's ibrun and
MPICH's PMI client aborting the job (``mpi-abort``); torch.distributed.rpc's TensorPipe agent, Julia's
Distributed and MPICH2's smpd (``mpi-comm``); Horovod's timeout check, Julia's cluster managers and the
c10d store barrier given up (``rendezvous``); an older kubelet's ``FailedSync`` (``disk-full``). Each near-miss names a family's words without reporting
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


_MPI_COMM: dict[str, Wording] = {
    # torch.distributed.rpc's TensorPipe agent reading a request from a peer that went (c10's warning prefix,
    # torch/csrc/distributed/rpc/tensorpipe_agent.cpp; TensorPipe's libuv transport)
    "tensorpipe-agent-reading-request-econnreset": (
        "[W tensorpipe_agent.cpp:726] RPC agent for worker0 encountered error when reading incoming request "
        "from worker2: ECONNRESET: connection reset by peer (this error originated at "
        "tensorpipe/transport/uv/connection_impl.cc:132)",
        "TensorPipe agent",
        "TP_SOCKET_IFNAME",
        "pytorch",
    ),
    # Julia's Distributed on a worker its peer gave up waiting for (Distributed's cluster.jl, wait_for_conn)
    "julia-peer-didnt-connect-within-seconds": (
        "      From worker 3:    peer 2 didn't connect to 3 within 59.99 seconds\n"
        "      From worker 3:    Stacktrace:\n      From worker 3:      [1] wait_for_conn",
        "Julia's Distributed",
        "JULIA_WORKER_TIMEOUT",
        "other",
    ),
    # MPICH2's smpd on Windows having tried every address of another host (its sock layer)
    "mpich2-smpd-connect-on-sock-other-host": (
        "C:\\jobs>mpiexec -hosts 2 node01 node02 solver.exe\n"
        "Connect on sock (host=node02, port=8676) failed, exhaused all end points",
        "smpd",
        "smpd -d",
        "mpich",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # Horovod on Spark: its driver's timeout check, where the traceback lost the message under it
    # (horovod/spark/runner.py, horovod/runner/common/util/timeout.py)
    "horovod-spark-check-time-out-frame": (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.8/site-packages/horovod/runner/common/service/driver_service.py", '
        "line 166, in wait_for_initial_registration\n"
        "    timeout.check_time_out_for('Spark tasks to start')",
        "Spark tasks to start",
        "--start-timeout",
        "horovod",
    ),
    # Julia's addprocs reading a worker's address that never came (Distributed's managers.jl)
    "julia-addprocs-timed-out-reading-host-port": (
        "ERROR: LoadError: TaskFailedException\n"
        "    nested task error: Timed out waiting to read host:port string from worker.",
        "Julia workers",
        "JULIA_WORKER_TIMEOUT",
        "other",
    ),
    # the store barrier's progress line in its later wording, then init_process_group raising from the
    # launcher's script
    "store-barrier-waiting-then-init-process-group-raised": (
        "Waiting in store based barrier to initialize process group for rank: 3, key: store_based_barrier_key:1 "
        "(world_size=8, num_workers_joined=5, timeout=0:30:00)\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/main.py", line 41, in setup\n'
        '    torch.distributed.init_process_group(backend="nccl", init_method="env://")',
        "store barrier",
        "MASTER_ADDR",
        "pytorch",
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
            "mpi-comm": _MPI_COMM,
            "rendezvous": _RENDEZVOUS,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


def test_the_kubelets_older_failed_sync_on_a_full_disk_is_its_own() -> None:
    """An older kubelet's ``FailedSync`` on an image it could not pull onto a full disk, listed with its reason
    as a column (the watcher's event without a reason): the kubelet could not pull the image."""
    text = (
        "  3m  3m  1  {kubelet node-3}  Warning  FailedSync  Error syncing pod, skipping: failed to "
        '"StartContainer" for "trainer" with ErrImagePull: "write /var/lib/docker/tmp/GetImageBlob1: no space '
        'left on device"'
    )
    fires_saying(
        text, "disk-full", "pull or start a container's image", "", stack="kubernetes", where="event"
    )


# a family's words named, not reported: the store barrier's progress with no raise after it, a person's question about a queue's refusal, a format shown in a
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
    # the store barrier still waiting, then completing: the ranks met
    "store-barrier-waiting-then-completed": (
        "Waiting in store based barrier to initialize process group for rank: 0, key: store_based_barrier_key:1 "
        "(world_size=2, worker_count=1, timeout=0:30:00)\n"
        "Rank 0: Completed store-based barrier for key:store_based_barrier_key:1 with 2 nodes.\n"
        "Traceback (most recent call last):\n"
        '  File "/workspace/main.py", line 12, in <module>\n'
        '    torch.distributed.init_process_group(backend="gloo")',
        "pytorch",
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
