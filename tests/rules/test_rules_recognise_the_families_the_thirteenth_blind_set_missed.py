"""The families the blind set of 2026-11-30e showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines: a batch scheduler killing a
job for its memory (``oom``); the device memory of accelerators other than NVIDIA's and AMD's running out
(``gpu-oom``, worded by the device); NCCL's own CUDA error, HCCL under torch_npu and on Gaudi, a rank's
runtime failing to initialise its PMIx wiring (``mpi-comm``); a child process dead of a signal as Python
and torch's spawn report it (``segfault``, ``mpi-abort``); ROCm's memory fault (``gpu-error``); the c10d
store's client giving up and Horovod's driver waiting on its tasks (``rendezvous``); a batch queue holding
a job (``quota``); Ray's spilling to a full disk (``disk-full``). Each near-miss names a family's words
without reporting its failure.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import fires_alone, fires_saying, replayed, stays_quiet

# (text, rule, stack, what the root cause says, what a step of the remediation says)
_FAMILIES: list[tuple[str, RuleId, str, str, str]] = [
    # a batch scheduler's memory kill: TORQUE's MOM on pvmem, Grid Engine's execd, LSF after Open MPI's abort
    (
        "=>> PBS: job killed: pvmem 4294967296b exceeded limit 2147483648b",
        "oom",
        "linux",
        "PBS killed the job",
        "batch scheduler",
    ),
    (
        'job 4211.1 exceeds job hard limit "h_vmem" of queue "all.q@node07" (12.1G > limit:12.0G) - sending '
        "SIGKILL",
        "oom",
        "linux",
        "Grid Engine killed the job",
        "h_vmem",
    ),
    (
        "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n"
        "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.\nExited with exit code 130.",
        "oom",
        "openmpi",
        "LSF killed the job",
        "bjobs -l",
    ),
    # accelerators' device memory, named by the device
    (
        "[EXCEPTION] DEVICE(4410,ffff8e,python):2025-02-01-10:11:12.123.456 [mindspore/ccsrc/plugin/device/"
        "ascend/hal/hardware/ge_device_res_manager.cc:91] AllocateMemory] Out of Memory!!! Request memory "
        "size: 2147483648B, Memory Statistic:",
        "gpu-oom",
        "other",
        "MindSpore",
        "batch size",
    ),
    (
        "[ERROR] RUNTIME(2231,python):2025-02-01-10:11:12.123.456 [device_allocator.cc:72] rtMalloc execute "
        "failed, reason=[driver error:out of memory]",
        "gpu-oom",
        "other",
        "NPU out of memory",
        "batch size",
    ),
    (
        "[bmlib_memory][error] bm_malloc_device_byte_heap failed, heap_id_mask = 0x7, size = 0x12c0000",
        "gpu-oom",
        "other",
        "Sophgo bmlib",
        "batch size",
    ),
    (
        "RuntimeError: FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::1073741824 (1024)MB",
        "gpu-oom",
        "pytorch",
        "HPU out of memory",
        "batch size",
    ),
    (
        'RuntimeError: nrt_load status=4 message="Allocation Failure"',
        "gpu-oom",
        "other",
        "NeuronCore out of memory",
        "batch size",
    ),
    # the mesh: NCCL's own CUDA error under Horovod, HCCL under torch_npu and on Gaudi, PMIx's wiring
    (
        "horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: unhandled cuda error",
        "mpi-comm",
        "nccl",
        "ncclUnhandledCudaError",
        "",
    ),
    (
        "RuntimeError: [ERROR] HCCL error in: torch_npu/csrc/distributed/ProcessGroupHCCL.cpp:1880\n"
        "[ERROR] 2025-03-04-05:06:07 (PID:311, Device:5, RankID:5) ERR02200 DIST call hccl api failed.",
        "mpi-comm",
        "pytorch",
        "HCCL (Ascend's",
        "hccn_tool",
    ),
    (
        "RuntimeError: Collective call returned error\nException raised from operator() at /npu-stack/"
        "pytorch-integration/python_packages/habana_frameworks/torch/distributed/hccl/"
        "process_group_hccl_base.cpp:310 (most recent call first):",
        "mpi-comm",
        "pytorch",
        "Habana Gaudi",
        "hl-smi",
    ),
    (
        "It looks like orte_init failed for some reason; your parallel process is\n"
        "likely to abort.  There are many reasons that a parallel process can\n"
        "fail during orte_init; some of which are due to configuration or\n"
        "environment problems.",
        "mpi-comm",
        "openmpi",
        "could not initialise",
        "srun --mpi=list",
    ),
    (
        "srun: error: mpi/pmix_v4: init: (null) [0]: mpi_pmix.c:139: pmi/pmix: can not load PMIx library",
        "mpi-comm",
        "openmpi",
        "could not initialise",
        "srun --mpi=list",
    ),
    (  # torch_npu's watchdog over HCCL: HCCL's steps, not NCCL's
        "[rank0]:[E1203 10:11:12.000000 compiler_depend.ts:560] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkHCCL(SeqNum=88, OpType=ALLGATHER, Timeout(ms)=600000) ran for 600117 milliseconds "
        "before timing out.",
        "mpi-comm",
        "pytorch",
        "HCCL, under torch_npu",
        "HCCL_EXEC_TIMEOUT",
    ),
    # a child process dead of a signal
    (
        "subprocess.CalledProcessError: Command '['python', 'worker.py']' died with <Signals.SIGSEGV: 11>.",
        "segfault",
        "other",
        "segmentation fault",
        "backtrace",
    ),
    (
        "torch.multiprocessing.spawn.ProcessExitedException: process 2 terminated with signal SIGSEGV",
        "segfault",
        "pytorch",
        "segmentation fault",
        "backtrace",
    ),
    (
        "torch.multiprocessing.spawn.ProcessExitedException: process 3 terminated with signal SIGABRT",
        "mpi-abort",
        "pytorch",
        "Rank 3",
        "",
    ),
    (
        "ABORT!!! Out of all 8 trainers, the trainer process with rank=[5] was aborted. Please check its log.",
        "mpi-abort",
        "other",
        "PaddlePaddle's launcher",
        "",
    ),
    # ROCm's memory fault, in HSA's status and with its node quoted
    (
        "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest "
        "legal address. code: 0x29",
        "gpu-error",
        "other",
        "ROCm's memory access fault",
        "",
    ),
    # the rendezvous: the c10d store's client, its retry ended by the exception; Horovod's driver
    (
        "[W1203 10:11:12.000000 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host "
        "master-0:29500 - retrying (try=2, timeout=600000ms, delay=2048ms): Connection refused\n"
        "Exception raised from recvBytes at ../torch/csrc/distributed/c10d/Utils.hpp:672 (most recent call "
        "first):",
        "rendezvous",
        "pytorch",
        "master-0:29500 (Connection refused)",
        "",
    ),
    (
        "Exception: Timed out waiting for tasks to start. Please check connectivity between servers. You may "
        "need to increase the --start-timeout parameter if you have too many servers. Timeout after 120 "
        "seconds.",
        "rendezvous",
        "horovod",
        "Horovod's driver",
        "--start-timeout",
    ),
    # Ray's object store on a full disk
    (
        "ray.exceptions.OutOfDiskError: Local disk is full\nThe object cannot be created because the local "
        "object store is full and the local disk's utilization is over capacity (95% by default).",
        "disk-full",
        "other",
        "Ray's object store",
        "df -h",
    ),
    (
        "Checkpoints kept on the node's disk ended up causing a 'No space left on device' error",
        "disk-full",
        "other",
        "no space left on device",
        "df -h",
    ),
]


@pytest.mark.parametrize(
    ("text", "rule", "stack", "said", "step"),
    _FAMILIES,
    ids=[
        "torque-pvmem",
        "grid-engine-h-vmem",
        "lsf-after-mpi-abort",
        "mindspore-out-of-memory",
        "cann-rtmalloc",
        "sophgo-bmlib-heap",
        "habana-pt-devmem",
        "neuron-nrt-load",
        "horovod-nccl-unhandled-cuda",
        "torch-npu-hccl-api",
        "gaudi-collective-call",
        "ompi-orte-init",
        "slurm-pmix-plugin",
        "hccl-watchdog-steps",
        "subprocess-died-with-sigsegv",
        "spawn-sigsegv",
        "spawn-sigabrt",
        "paddle-launcher-abort",
        "hsa-aperture-violation",
        "tcpstore-retry-ended",
        "horovod-start-timeout",
        "ray-out-of-disk",
        "caused-enospc",
    ],
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    text: str, rule: RuleId, stack: str, said: str, step: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


def test_a_gpu_fault_in_ncclS_last_error_is_the_gpus_not_the_communicators() -> None:
    text = (
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:2006, unhandled cuda error (run with NCCL_DEBUG=INFO for details)\n"
        "[rank1]: Last error:\n[rank1]: Cuda failure 'an illegal memory access was encountered'"
    )
    fires_alone(text, "gpu-error", stack="nccl")


@pytest.mark.parametrize(
    ("text", "reason", "said", "step"),
    [
        (
            "couldn't assign flavors to pod set launcher: insufficient quota for nvidia.com/gpu in flavor "
            "a100-spot, previously considered podsets requests (0) + current podset request (8) > maximum "
            "capacity (4)",
            "Pending",
            "Kueue could not fit pod set launcher",
            "clusterqueue",
        ),
        (
            "3/3 tasks in gang unschedulable: queue resource quota insufficient",
            "Unschedulable",
            "Volcano's queue",
            "podgroup",
        ),
    ],
    ids=["kueue-gpu-flavor", "volcano-gang"],
)
def test_a_batch_queue_holding_the_job_for_its_quota_is_quota_judged_by_the_outcome(
    text: str, reason: str, said: str, step: str
) -> None:
    fires_saying(text, "quota", said, step, stack="kubernetes", where="event", reason=reason)
    succeeded = replayed(text, None, stack="kubernetes", where="event", reason=reason, succeed=True)
    assert succeeded.rules == frozenset()


# a family's words named, not reported: source, a test's description, a patch's subject, a setting
# explained, advice, the raylet's warning alone, a hypothetical
_QUIET: dict[str, tuple[str, str]] = {
    "source-return": (
        '  return "ncclRemoteError: A call failed possibly due to a network error or a remote process";',
        "nccl",
    ),
    "source-case": ("    case ncclUnhandledCudaError:", "nccl"),
    "test-description": ("test_description='Test that ENOSPC on the journal is reported'", "other"),
    "patch-subject": ("Subject: [PATCH 2/3] btl/tcp: report ECONNREFUSED with the peer's address", "openmpi"),
    "setting-explained": (
        "HCCL_CONNECT_TIMEOUT sets how long HCCL waits for a socket before a timeout is reported",
        "other",
    ),
    "lsf-advice": (
        "If you see `TERM_MEMLIMIT: job killed after reaching LSF memory usage limit`, raise -M.",
        "linux",
    ),
    "mindspore-advice": (
        "Set MS_ALLOC_CONF to avoid `Out of Memory!!! Request memory size` on small NPUs.",
        "other",
    ),
    "pmix-advice": (
        'If you see "It looks like pmix_init failed for some reason", start munged first.',
        "openmpi",
    ),
    "raylet-warning-alone": (
        "(raylet) file_system_monitor.cc:111: /tmp/ray/session_latest is over 95% full, available "
        "space: 7340032; capacity: 268435456. Object creation will fail if spilling is required.",
        "other",
    ),
    "enospc-may-cause": ('Too many trial logs may cause a "No space left on device" error.', "other"),
    "horovod-advice": (
        "Launching with --start-timeout 300 to avoid `Timed out waiting for tasks to start`.",
        "horovod",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_the_thirteenth_sets_families_named_without_their_failure_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
