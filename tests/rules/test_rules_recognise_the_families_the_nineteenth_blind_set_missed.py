"""The families the blind set of 2026-11-30k showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: Julia's
signal handler (``signal (N): <name>`` with the expression it was running) and PETSc's (``segfault``);
ROCm's runtime (ROCclr) and MIOpen failing to allocate device memory, PaddlePaddle's BadAlloc, Theano's
device memory (``gpu-oom``); c10's CPU allocator and Flux's job shell's oom plugin (``oom``); the kubelet's
storage eviction message alone (``disk-full``); a quota refusal wrapped in a status, Kueue's reasons alone,
vCluster Platform's quota admission (``quota``); THD's address in use (``rendezvous``). Each near-miss names
a family's words without reporting its failure: a condition, advice, a class explained.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_SEGFAULT: dict[str, Wording] = {
    # Julia 1.7+ with its pid and the siginfo code, the expression's file and line (JuliaLang/julia
    # src/signals-unix.c's jl_critical_error)
    "julia-signal-11-2-in-expression-starting-at": (
        "[2217] signal (11.2): Segmentation fault\n"
        "in expression starting at /work/solver/run.jl:42\n"
        "ucp_tag_send_nbx at /opt/ucx/lib/libucp.so.0 (unknown line)",
        "in Julia code at /work/solver/run.jl:42",
        "MPIPreferences",
        "mpi",
    ),
    # older Julia's bus error with its ``while loading`` line (the same handler before 1.1)
    "julia-signal-7-bus-error-while-loading": (
        "signal (7): Bus error\nwhile loading /home/u/bench.jl, in expression starting on line 9",
        "in Julia code at /home/u/bench.jl:9",
        "UCX_ERROR_SIGNALS",
        "mpi",
    ),
    # PETSc's handler on a bus error (petsc src/sys/error/signal.c's table)
    "petsc-caught-signal-7-bus": (
        "[3]PETSC ERROR: ------------------------------------------------------------------------\n"
        "[3]PETSC ERROR: Caught signal number 7 BUS: Bus Error, possibly illegal memory access\n"
        "[3]PETSC ERROR: Try option -start_in_debugger or -on_error_attach_debugger",
        "PETSc",
        "-on_error_attach_debugger",
        "mpi",
    ),
}

_GPU_OOM: dict[str, Wording] = {
    # ROCclr's hip_memory.cpp with AMD_LOG_LEVEL=1 (ROCm/clr rocclr and hipamd sources)
    "rocclr-allocation-failed-device-memory": (
        ":1:hip_memory.cpp           :512 : 1234567890 us: 88 : [tid:0x7f00aa] Allocation failed : Device "
        "memory : required :8589934592 | free :1073741824 | total :34342961152",
        "ROCclr",
        "rocm-smi",
        "pytorch",
    ),
    # MIOpen's handle on its own line (ROCm/MIOpen src/hip/handlehip.cpp)
    "miopen-memory-not-available-alone": (
        "MIOpen(HIP): Error [Allocate] Memory not available to allocate buffer: 2147483648",
        "MIOpen",
        "MIOPEN_FIND_MODE",
        "pytorch",
    ),
    # PaddlePaddle's BadAlloc named with its message (PaddlePaddle/Paddle paddle/fluid/memory/allocation)
    "paddle-badalloc-named-with-out-of-memory": (
        "paddle::memory::allocation::BadAlloc: ResourceExhaustedError: Out of memory on the device.",
        "PaddlePaddle",
        "FLAGS_allocator_strategy",
        "other",
    ),
    # Theano's CNMeM pool (Theano/Theano's cnmem status)
    "theano-cnmem-status-out-of-memory": (
        "RuntimeError: Cuda error: CNMEM_STATUS_OUT_OF_MEMORY",
        "Theano",
        "lib.cnmem",
        "other",
    ),
}

_OOM: dict[str, Wording] = {
    # c10's allocator on Windows (pytorch/pytorch c10/core/impl/alloc_cpu.cpp)
    "default-cpu-allocator-not-enough-memory": (
        "RuntimeError: [enforce fail at ..\\c10\\core\\impl\\alloc_cpu.cpp:72] data. DefaultCPUAllocator: not "
        "enough memory: you tried to allocate 1073741824 bytes.",
        "out of memory",
        "",
        "pytorch",
    ),
    # Flux's shell with more than one task killed (flux-framework/flux-core src/shell/oom.c)
    "flux-shell-oom-killed-tasks": (
        "12.002s: flux-shell[3]: ERROR: oom: Memory cgroup out of memory: killed 4 tasks on node17.",
        "Flux's job shell",
        "flux run",
        "other",
    ),
}

_DISK_FULL: dict[str, Wording] = {
    # the kubelet's eviction on inodes as a pod's status message (kubernetes/kubernetes pkg/kubelet/eviction)
    "kubelet-eviction-inodes-status-message": (
        '  message: "The node was low on resource: inodes. "\n  reason: Evicted',
        "ephemeral storage",
        "",
        "kubernetes",
    ),
}

_QUOTA: dict[str, Wording] = {
    # the quota admission's refusal in a ReplicaSet's condition wrapped by kubectl's YAML (kubernetes/
    # kubernetes plugin/pkg/admission/resourcequota)
    "replicaset-condition-exceeded-quota-wrapped": (
        '    message: \'pods "trainer-7f9c" is forbidden: exceeded quota:\n'
        "      gpu-quota, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8,\n"
        "      limited: requests.nvidia.com/gpu=8'\n"
        "    reason: FailedCreate",
        "gpu-quota",
        "describe resourcequota",
        "kubernetes",
    ),
    # Kueue's flavor assigner's reason on its own (kubernetes-sigs/kueue pkg/scheduler/flavorassigner)
    "kueue-insufficient-quota-in-flavor-alone": (
        "Workload default/job-trainer is pending: insufficient quota for nvidia.com/gpu in flavor a100, "
        "request > maximum capacity (16 > 8)",
        "Kueue",
        "nominalQuota",
        "kubernetes",
    ),
    # vCluster Platform's quota admission per team (vCluster Platform docs, quotas)
    "vcluster-platform-per-team-limit": (
        "Error: admission denied: Forbidden: cannot create virtualclusterinstance, because per-team "
        "virtualclusterinstances limit of 4 would be exceeded",
        "vCluster Platform",
        "spec.quotas",
        "kubernetes",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # THD's TCP data channel (pytorch/pytorch torch/lib/THD/base/data_channels/DataChannelTCP.cpp, torch 0.3)
    "thd-data-channel-tcp-address-in-use": (
        "RuntimeError: Address already in use at /opt/pytorch/torch/lib/THD/base/ChannelUtils.cpp:231",
        "",
        "",
        "pytorch",
    ),
}

_MPI_COMM: dict[str, Wording] = {
    # Horovod's coordinator on ranks sending different data types (horovod/horovod horovod/common/controller.cc)
    "horovod-mismatched-data-types": (
        "[0]<stderr>:horovod.common.exceptions.HorovodInternalError: Mismatched data types: One rank had type "
        "float32, but another rank had type float16.",
        "Horovod",
        "HOROVOD_LOG_LEVEL",
        "horovod",
    ),
    # Open MPI's shmem mmap component with its segment under /dev/shm (open-mpi/ompi opal/mca/shmem/mmap)
    "ompi-shmem-mmap-dev-shm-segment": (
        "[node3:02114] shmem: mmap: an error occurred while determining whether or not "
        "/dev/shm/vader_segment.node3.5a1c0001.2 could be created.",
        "shmem",
        "OMPI_MCA_shmem_mmap_backing_file_base_dir",
        "mpi",
    ),
    # Slurm's mpi/pmix plugin dumping its tree fence (SchedMD/slurm src/plugins/mpi/pmix/pmixp_coll_tree.c)
    "slurm-pmix-coll-fence-tree": (
        "slurmstepd: error: node07 [2] pmixp_coll_tree.c:1317 [pmixp_coll_tree_log] mpi/pmix: ERROR: "
        "0x1550a0012345: COLL_FENCE_TREE state seq=3",
        "mpi/pmix",
        "SLURM_PMIX_TIMEOUT",
        "mpi",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # Open MPI's runtime aborting the job's other processes from the fatal handler (open-mpi/ompi
    # ompi/runtime/ompi_mpi_abort.c)
    "ompi-called-abort-peers-after-allreduce": (
        "[node2:31337] *** An error occurred in MPI_Allreduce\n[node2:31337] [[4411,1],5] called abort_peers",
        "MPI_Allreduce failed",
        "",
        "mpi",
    ),
}

_GPU_ERROR: dict[str, Wording] = {
    # ROCm's runtime's fault retold with a capital F (ROCm/ROCR-Runtime's message as MIGraphX's users quote it)
    "rocm-memory-access-fault-capitalised": (
        "Memory access Fault by GPU node-3 (Agent handle: 0x55d0a1b2c3d0) on address 0x7f2a00000000. Reason: "
        "Page not present or supervisor privilege.",
        "ROCm",
        "",
        "pytorch",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "segfault": _SEGFAULT,
            "gpu-oom": _GPU_OOM,
            "oom": _OOM,
            "disk-full": _DISK_FULL,
            "quota": _QUOTA,
            "rendezvous": _RENDEZVOUS,
            "mpi-comm": _MPI_COMM,
            "mpi-abort": _MPI_ABORT,
            "gpu-error": _GPU_ERROR,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# a family's words named, not reported: a condition, advice, a class explained
_QUIET: dict[str, tuple[str, str]] = {
    # Horovod's check explained in a design note, no run named
    "horovod-mismatch-explained": (
        "Mismatched data types are reported when ranks submit different dtypes for the same tensor name.",
        "horovod",
    ),
    # a question's condition quoting Julia's handler
    "if-julia-prints-signal-11": (
        "If Julia prints 'signal (11): Segmentation fault' at MPI.Init, is MPIPreferences set wrong?",
        "mpi",
    ),
    # advice naming MIOpen's words
    "to-avoid-miopen-buffer": (
        "To avoid 'Memory not available to allocate buffer: 1024' lower MIOPEN workspace limits.",
        "pytorch",
    ),
    # Kueue's reason explained, no workload named
    "kueue-insufficient-unused-quota-explained": (
        'The "insufficient unused quota" reason is reported when the cohort has nothing left to lend.',
        "kubernetes",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
