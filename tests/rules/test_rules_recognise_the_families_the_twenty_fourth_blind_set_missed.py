"""The families the blind set of 2026-11-30p showed missing, and its false alarms, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: the c10d
store's client under ``init_process_group``'s ``env://`` handler unable to resolve its host, the handler
finding one of its variables unset, a reset in the store's constructor named by c10's C++ frames
(``rendezvous``, not the mesh); glibc's heap check ending the rank with SIGABRT and DeepSpeed's launcher
killing its subprocesses (``mpi-abort``); Amazon SageMaker's ``ResourceLimitExceeded`` (``quota``); the JVM's
``OutOfMemoryError`` wrapped at a console's 80 columns (``oom``); a CUDA wrapper's uncaught exception ending in
``out of memory`` (``gpu-oom``); cuBLAS's ``CUBLAS_STATUS_EXECUTION_FAILED`` (``gpu-error``); MPICH ch3's
message truncated, perftest's failed completion, the mlx5 driver's CQ error and Spectrum MPI's PAMI CMA
assertion (``mpi-comm``). Each near-miss names a family's words without reporting its failure:
ProcessGroupNCCL's heartbeat monitor noting, as the job shuts down, that it could not read or write its dump
flag in the store; DeepSpeed's launcher killing its subprocesses after a person's interrupt; a reset under a
store already set up; glibc's heap check named with no abort after it.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_RENDEZVOUS: dict[str, Wording] = {
    # torch 1.x's tcputil resolving MASTER_ADDR for the store's client (getaddrinfo's EAI_AGAIN words)
    "env-rendezvous-tcpstore-host-not-found-temporary-failure": (
        "Traceback (most recent call last):\n"
        '  File "/opt/conda/lib/python3.6/site-packages/torch/distributed/distributed_c10d.py", line 280, in '
        "init_process_group\n"
        "    store, rank, world_size = next(rendezvous(url))\n"
        '  File "/opt/conda/lib/python3.6/site-packages/torch/distributed/rendezvous.py", line 120, in '
        "_env_rendezvous_handler\n"
        "    store = TCPStore(master_addr, master_port, start_daemon)\n"
        "ValueError: host not found: Temporary failure in name resolution",
        "host not found: Temporary failure in name resolution",
        "MASTER_ADDR",
        "pytorch",
    ),
    # the env:// handler on another variable it reads, raised through torch.distributed.rpc's init_rpc
    "env-rendezvous-master-port-expected-but-not-set": (
        '  File "/usr/lib/python3/site-packages/torch/distributed/rpc/__init__.py", line 190, in init_rpc\n'
        "    store, _, _ = next(rendezvous_iterator)\n"
        "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable "
        "MASTER_PORT expected, but not set",
        "found MASTER_PORT unset",
        "init_method='tcp://",
        "pytorch",
    ),
    # the store's client validating its connection in the constructor (TCPStore::ping) and reset, on Linux
    "tcpstore-ping-reset-in-constructor-linux-frames": (
        "[W1105 10:00:01.000000000 TCPStore.cpp:142] [c10d] recvValue failed on SocketImpl(fd=9, "
        "addr=[trainer-worker-1]:41234, remote=[trainer-master-0]:29500): Connection reset by peer\n"
        "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:670 (most recent call "
        "first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f00 in libc10.so)\n"
        "frame #1: <unknown function> + 0x5d2c0 (0x7f01 in libtorch_cpu.so)\n"
        "frame #2: c10d::TCPStore::ping() + 0x1a0 (0x7f02 in libtorch_cpu.so)\n"
        "frame #3: c10d::TCPStore::TCPStore(std::string, c10d::TCPStoreOptions const&) + 0x3c4 (0x7f03 in "
        "libtorch_cpu.so)",
        "had its connection to the c10d store reset while the store was being set up",
        "MASTER_ADDR",
        "pytorch",
    ),
}


_MPI_ABORT: dict[str, Wording] = {
    # glibc's malloc on a freed chunk whose neighbour it found overwritten, then Open MPI's signal handler
    "glibc-double-free-or-corruption-then-open-mpi-signal-6": (
        "double free or corruption (!prev)\n[gpu-7:12001] *** Process received signal ***\n"
        "[gpu-7:12001] Signal: Aborted (6)\n[gpu-7:12001] Signal code:  (-6)",
        "glibc's malloc found the heap corrupted (double free or corruption (!prev))",
        "MALLOC_CHECK_",
        "openmpi",
    ),
    # older glibc's banner around the check, the shell's account of the abort after it
    "glibc-detected-munmap-chunk-then-aborted-core-dumped": (
        "*** glibc detected *** ./solver: munmap_chunk(): invalid pointer: 0x0000000001a2b3c0 ***\n"
        "Aborted (core dumped)",
        "munmap_chunk(): invalid pointer",
        "-fsanitize=address",
        "other",
    ),
    # DeepSpeed's launcher (launcher/launch.py) killing what it started, at a newer release's line
    "deepspeed-launch-sigkill-handler-killing-subprocess": (
        "[2024-03-02 10:11:12,345] [INFO] [launch.py:316:sigkill_handler] Killing subprocess 4711\n"
        "[2024-03-02 10:11:12,346] [INFO] [launch.py:316:sigkill_handler] Killing subprocess 4712",
        "DeepSpeed's launcher killed the subprocesses it started",
        "--enable_each_rank_log",
        "deepspeed",
    ),
}


_QUOTA: dict[str, Wording] = {
    # boto's error class as botocore's error factory names it, a tuning job's operation, the newer closing words
    "sagemaker-tuning-job-resource-limit-exceeded": (
        "botocore.errorfactory.ResourceLimitExceeded: An error occurred (ResourceLimitExceeded) when calling "
        "the CreateHyperParameterTuningJob operation: The account-level service limit 'ml.g5.12xlarge for "
        "training job usage' is 4 Instances, with current utilization of 4 Instances and a request delta of 2 "
        "Instances. Please use AWS Service Quotas to request an increase for this quota.",
        "'ml.g5.12xlarge for training job usage' is 4 instances with 4 in use, and it asked for 2 more",
        "Service Quotas",
        "other",
    ),
    # the same refusal wrapped by a pipeline's step at its console's width, the limit's name cut by the wrap
    "sagemaker-refusal-wrapped-limit-name": (
        "RuntimeError: step 'trainer' failed: An error occurred (ResourceLimitExceeded) when calling the "
        "CreateTrainingJob operation: The account-level service limit 'ml.p4d.24xlarge\n"
        "for training job usage' is 1 Instances, with current utilization of 1 Instances and a request\n"
        "delta of 1 Instances.",
        "'ml.p4d.24xlarge for training job usage' is 1 instances",
        "instance_count",
        "other",
    ),
}


_MPI_COMM: dict[str, Wording] = {
    # MPICH's ch3 under a plain MPI program's point-to-point receive, its error stack's last frame
    "mpich-ch3-recv-message-truncated-unpack-uebuf": (
        "Fatal error in MPI_Recv: Message truncated, error stack:\n"
        "MPI_Recv(200)......................: MPI_Recv(buf=0x7ffd1c, count=10, MPI_INT, src=0, tag=5, "
        "MPI_COMM_WORLD, status=0x7ffd2c) failed\n"
        "MPIDI_CH3U_Request_unpack_uebuf(618): Message truncated; 80 bytes received but buffer size is 40",
        "MPI_ERR_TRUNCATE",
        "MPI_Get_count",
        "mpich",
    ),
    # perftest's ib_read_bw on the server side, retries exceeded (ibv_wc_status 12)
    "perftest-ib-read-bw-failed-status-12-at-server": (
        "Completion with error at server\n Failed status 12: wr_id 0 syndrom 0x81\nscnt=128, ccnt=0",
        "an InfiniBand work completion failed in perftest's test",
        "ibstat",
        "infiniband",
    ),
    # the mlx5 driver's event with the syndrome spelt out and another device's address
    "mlx5-eq-int-cq-error-syndrome-access-violation": (
        "[ 8812.123456] mlx5_core 0000:81:00.1: mlx5_eq_int:611:(pid 1234): CQ error on CQN 0x2c8, syndrome "
        "0x2",
        "the HCA reported an error event on a completion queue",
        "dmesg | grep mlx5",
        "infiniband",
    ),
    # PAMI's CMA read asserting in another program, the assertion on one line
    "spectrum-pami-cma-read-impl-assertion-one-line": (
        "a.out: /opt/ibm/spectrum_mpi/pami/components/devices/shmem/shaddr/CMAShaddr.h:164: size_t "
        "PAMI::Device::Shmem::CMAShaddr::read_impl(PAMI::Memregion*, size_t, PAMI::Memregion*, size_t, "
        "size_t, bool*): Assertion `cbytes > 0' failed.",
        "PAMI could not read another rank's memory by cross-memory attach",
        "PAMI_DISABLE_CMA=1",
        "other",
    ),
}
_GPU_ERROR: dict[str, Wording] = {
    # PyTorch's check of a cuBLAS call (aten/src/ATen/cuda/CUDABlas.cpp's TORCH_CUDABLAS_CHECK)
    "pytorch-cublas-status-execution-failed-sgemm": (
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, "
        "opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
        "CUBLAS_STATUS_EXECUTION_FAILED",
        "CUDA_LAUNCH_BLOCKING=1",
        "pytorch",
    ),
}
_GPU_OOM: dict[str, Wording] = {
    # a CUDA wrapper's exception type in a namespace of its own, CUDA's words at the end of its what() line
    "cuda-wrapper-exception-what-ends-out-of-memory": (
        "terminate called after throwing an instance of 'cuda_api::cuda_error'\n"
        "  what():  cudaMalloc(&ptr, 4294967296) at device_buffer.cu:88: out of memory\n"
        "Aborted (core dumped)",
        "a library's cuda_api::cuda_error could not get device memory",
        "",
        "other",
    ),
}
_OOM: dict[str, Wording] = {
    # a Spark executor's JVM out of heap, its message cut at the console's 80 columns inside the class's name
    "jvm-heap-space-wrapped-at-80-columns-inside-the-class": (
        'Exception in thread "Executor task launch worker for task 3" java.lang.OutOfMemo\n'
        "ryError: Java heap space\n"
        "        at java.util.Arrays.copyOf(Arrays.java:3236)",
        "the JVM's heap was used up",
        "",
        "other",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "rendezvous": _RENDEZVOUS,
            "mpi-abort": _MPI_ABORT,
            "quota": _QUOTA,
            "oom": _OOM,
            "gpu-oom": _GPU_OOM,
            "gpu-error": _GPU_ERROR,
            "mpi-comm": _MPI_COMM,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# a family's words named, not reported
_QUIET: dict[str, tuple[str, str]] = {
    # DeepSpeed's launcher killing its subprocesses after a person's Ctrl-C: the run stopped on purpose
    "deepspeed-launcher-main-process-received-sigint-killing-subprocess": (
        "[2024-03-02 10:11:10,001] [INFO] [launch.py:319:sigkill_handler] Main process received SIGINT, exiting\n"
        "[2024-03-02 10:11:10,002] [INFO] [launch.py:316:sigkill_handler] Killing subprocess 4711",
        "deepspeed",
    ),
    # a reset under c10's frames of a store already set up (a get during training): the mesh's or nothing here
    "tcpstore-reset-in-get-not-constructor": (
        "[W1105 10:00:01.000000000 TCPStore.cpp:142] [c10d] recvValue failed on SocketImpl(fd=9): Connection "
        "reset by peer\n"
        "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:670 (most recent call "
        "first):\n"
        "frame #2: c10d::TCPStore::doGet(std::string const&) + 0x33 (0x7f02 in libtorch_cpu.so)",
        "pytorch",
    ),
    # the heartbeat monitor's note on its dump flag, the store's server gone first (another rank, another reason)
    "heartbeat-should-dump-flag-connection-reset": (
        "[rank0]:[W1105 10:00:01.000000000 ProcessGroupNCCL.cpp:1481] [PG ID 0 PG GUID 0 Rank 0] Failed to "
        'check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: '
        "Connection reset by peer",
        "pytorch",
    ),
    # glibc's heap check named with no abort after it (a person's account of what they saw)
    "glibc-free-invalid-pointer-no-abort-after": (
        "we sometimes see free(): invalid pointer printed on exit, but the job completes",
        "other",
    ),
    # a newer torch's wording of the same note
    "heartbeat-exception-dump-flag-global-store": (
        "[rank7]:[E1105 10:00:02.000000000 ProcessGroupNCCL.cpp:1540] [PG ID 0 PG GUID 0(default_pg) Rank 7] "
        "Failed to get exception dump flag from the global store.Connection reset by peer",
        "pytorch",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
