"""The families the blind set of 2026-11-30i showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: CuPy's
memory pool in each release's OutOfMemoryError (``gpu-oom``); a CUDA error by the driver API's enum name as a
binding raises it (``gpu-error``); a bare connection failure raised where the processes meet, under a
rendezvous handler, the c10d store or Gloo's process group as it is built (``rendezvous``); a process group's
call whose frame line was cut, MPICH's error stack with its unnamed frame (``mpi-comm``); HPE's PALS on a rank
that died or exited, a person's sentence reporting mpirun's line in quotes (``mpi-abort``); Slurm's
OUT_OF_MEMORY state as sacct, scontrol and seff show it, Ray's raylet's advice after a kill (``oom``); a
LimitRange's every refusal, OpenShift's capitalised quota refusal (``quota``). Each near-miss names a family's
words without reporting its failure: a state in a page, a frequency in a design note, a hypothetical.
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
    # CuPy's OutOfMemoryError with a pool limit set (cupy/cupy cupy/cuda/memory.pyx, its message with
    # ``limit set to``)
    "cupy-out-of-memory-allocating-limit-set": (
        "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 2,097,152 bytes (allocated so far: "
        "8,388,608 bytes, limit set to: 8,589,934 bytes).",
        "CuPy's memory pool",
        "free_all_blocks",
        "other",
    ),
    # CuPy 4 and older's wording, raised bare through a model's forward (cupy/cupy v4 memory.pyx)
    "cupy-v4-out-of-memory-to-allocate": (
        '  File "cupy/cuda/memory.pyx", line 518, in cupy.cuda.memory.SingleDeviceMemoryPool.malloc\n'
        "cupy.cuda.memory.OutOfMemoryError: out of memory to allocate 524288 bytes (total 4194304 bytes)",
        "CuPy's memory pool",
        "CUPY_GPU_MEMORY_LIMIT",
        "other",
    ),
}

_GPU_ERROR: dict[str, Wording] = {
    # .NET's ManagedCuda raising the driver API's result by its enum name (kunzmi/managedCuda CUResult)
    "managedcuda-error-launch-failed": (
        "ManagedCuda.CudaException: ErrorLaunchFailed: An exception occurred on the device while executing "
        "a kernel.",
        "unspecified launch failure",
        "CUDA_LAUNCH_BLOCKING",
        "cuda",
    ),
    "managedcuda-error-misaligned-address": (
        "Unhandled exception. ManagedCuda.CudaException: ErrorMisalignedAddress: While executing a kernel, "
        "the device encountered a load or store instruction on a memory address which is not aligned.",
        "misaligned memory access",
        "CUDA_LAUNCH_BLOCKING",
        "cuda",
    ),
    "managedcuda-error-illegal-address": (
        "worker 2 stopped: CudaException: ErrorIllegalAddress",
        "illegal memory access",
        "compute-sanitizer",
        "cuda",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # init_process_group's tcp:// handler creating its store, refused (pytorch/pytorch
    # torch/distributed/rendezvous.py _tcp_rendezvous_handler, an older release's bare error)
    "tcp-rendezvous-handler-connection-refused": (
        '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line 121, in '
        "_tcp_rendezvous_handler\n"
        "    store = _create_c10d_store(result.hostname, result.port, rank, world_size, timeout)\n"
        "RuntimeError: Connection refused",
        "could not connect to the others while the process group was set up (Connection refused",
        "MASTER_ADDR",
        "pytorch",
    ),
    # Gloo's process group connecting its full mesh as it is built, unreachable peers (pytorch/pytorch
    # torch/distributed/distributed_c10d.py _new_process_group_helper)
    "gloo-process-group-no-route": (
        '  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 1010, in '
        "_new_process_group_helper\n"
        "    backend_class = ProcessGroupGloo(backend_prefix_store, group_rank, group_size, timeout=timeout)\n"
        "RuntimeError: No route to host",
        "No route to host",
        "NetworkPolicies",
        "gloo",
    ),
}

_MPI_COMM: dict[str, Wording] = {
    # a collective's source line above the bare error, its File line cut by the paste (pytorch/pytorch
    # torch/distributed/distributed_c10d.py all_reduce)
    "dist-all-reduce-connection-reset": (
        "    dist.all_reduce(grad, op=dist.ReduceOp.SUM)\nRuntimeError: Connection reset by peer",
        "torch.distributed",
        "MASTER_ADDR",
        "pytorch",
    ),
    # MPICH's error stack with an error created without its function's name (pmodels/mpich
    # src/mpi/errhan MPIR_Err_create_code, ``(unknown)()``), on a receive
    "mpich-unknown-frame-connection-failure-recv": (
        "Fatal error in MPI_Recv: Unknown error class, error stack:\n"
        "MPI_Recv(187): MPI_Recv(buf=0x7ffd, count=4, MPI_INT, src=3, tag=0, MPI_COMM_WORLD) failed\n"
        "(unknown)(): connection failure",
        "connection failure",
        "NetworkPolicies",
        "mpich",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # HPE's PALS on a rank killed by SIGKILL, the core it left (HPE Cray PALS mpiexec's rank report)
    "pals-rank-died-from-signal-9-dumped-core": (
        "nid004211: rank 17 died from signal 9 and dumped core",
        "Rank 17 on nid004211 was killed by signal 9",
        "PALS",
        "mpich",
    ),
    # the same launcher on a rank that exited non-zero
    "pals-rank-exited-with-code": (
        "x1002c3s5b0n0: rank 5 exited with code 2",
        "exited with code 2",
        "mpiexec --label",
        "mpich",
    ),
    # a person's sentence reporting mpirun's line quoted (open-mpi/ompi help-orte-errmgr-base.txt's
    # ``mpirun noticed that process rank …``), told as there being an issue of it
    "reported-issue-of-quoted-mpirun-noticed": (
        'During the long run we had a problem "mpirun noticed that process rank 7 with PID 4040 on node '
        'cn12 exited on signal 6 (Aborted)." and the job stopped.',
        "Rank 7 on cn12",
        "",
        "openmpi",
    ),
}

_OOM: dict[str, Wording] = {
    # sacct's listing with its State column widened (SchedMD slurm sacct --format State%14)
    "sacct-state-full-width": (
        "       JobID      State ExitCode\n"
        "------------ -------------- --------\n"
        "81234.0       OUT_OF_MEMORY    0:125",
        "out of memory",
        "",
        "other",
    ),
    # its State column at 8 characters, cut to ``OUT_OF_+`` (SchedMD slurm sacct's truncation)
    "sacct-state-narrow-width": (
        "81234.batch  OUT_OF_+    0:125",
        "out of memory",
        "",
        "other",
    ),
    # scontrol's record of the job (SchedMD slurm scontrol show job)
    "scontrol-jobstate-out-of-memory": (
        "JobId=81234 JobName=train.sh\n   JobState=OUT_OF_MEMORY Reason=OutOfMemory Dependency=(null)",
        "out of memory",
        "",
        "other",
    ),
    # Ray's raylet's advice after a kill, its kill threshold alone on the line a driver relayed
    # (ray-project/ray src/ray/raylet memory monitor's message)
    "ray-raylet-kill-threshold": (
        "(raylet, ip=10.0.4.7) To adjust the kill threshold, set the environment variable "
        "`RAY_memory_usage_threshold` when starting Ray.",
        "Ray's memory monitor",
        "RAY_memory_usage_threshold",
        "other",
    ),
}

_QUOTA: dict[str, Wording] = {
    # the LimitRange admission's ratio on a container with no request (kubernetes/kubernetes
    # plugin/pkg/admission/limitranger)
    "limitrange-ratio-no-request": (
        'Error creating: pods "trainer-1" is forbidden: cpu max limit to request ratio per Container is 4, '
        "but no request is specified or request is 0",
        "limit/request ratio of at most 4 per Container, but no request is set",
        "limitrange",
        "kubernetes",
    ),
    # its maximum with no limit given (the same admission's ``No limit is specified``)
    "limitrange-maximum-no-limit-specified": (
        'Error from server (Forbidden): pods "trainer-1" is forbidden: maximum memory usage per Container '
        "is 8Gi.  No limit is specified",
        "at most 8Gi memory per Container, but no limit is set",
        "limitrange",
        "kubernetes",
    ),
    # OpenShift's older quota admission, capitalised (openshift/origin's clusterquota refusal)
    "openshift-capitalised-exceeded-quota": (
        'Error creating: pods "trainer-1" is forbidden: Exceeded quota: gpu-quota, requested: '
        "requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8",
        "ResourceQuota gpu-quota is exhausted",
        "resourcequota gpu-quota",
        "kubernetes",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "gpu-oom": _GPU_OOM,
            "gpu-error": _GPU_ERROR,
            "rendezvous": _RENDEZVOUS,
            "mpi-comm": _MPI_COMM,
            "mpi-abort": _MPI_ABORT,
            "oom": _OOM,
            "quota": _QUOTA,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# a family's words named, not reported: a state a page explains, an error's frequency judged, a condition
_QUIET: dict[str, tuple[str, str]] = {
    # Slurm's state named in a page's list, its truncation explained (no listing's row, no exit code)
    "slurm-state-in-a-page": (
        "State OUT_OF_ME+ (sacct cuts OUT_OF_MEMORY to its column) is set for a job whose cgroup saw an OOM.",
        "other",
    ),
    # a design note judging how often the disk fills
    "enospc-judged-uncommon": (
        "Running out of disk (ENOSPC) while writing checkpoints is fairly uncommon, so the writer only logs it.",
        "other",
    ),
    # an answer's condition naming mpirun's line in quotes (not a report that there was one)
    "if-there-is-an-issue-of-quoted": (
        'If there is an issue of "mpirun noticed that process rank 0 with PID 1 on node a exited on signal 9 '
        '(Killed)." you should raise the memory limit.',
        "openmpi",
    ),
    # MPICH's unnamed frame on an error that is no communication's
    "mpich-unknown-frame-invalid-count": (
        "Fatal error in PMPI_Send: Unknown error.  Please file a bug report., error stack:\n"
        "(unknown)(): Invalid count",
        "mpich",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


# seen live, before the pod ends: the frame kept with the exception under it, wherever its path is written
_LIVE: dict[str, tuple[str, RuleId, str]] = {
    # a Windows path the ``torch/distributed`` frame pattern does not read: the frame's source line is kept
    # (pytorch/pytorch distributed_c10d.py _new_process_group_helper)
    "gloo-process-group-windows-path-connection-refused": (
        '  File "D:\\envs\\py39\\lib\\site-packages\\torch\\distributed\\distributed_c10d.py", line 887, in '
        "_new_process_group_helper\n"
        "    pg = ProcessGroupGloo(prefix_store, group_rank, group_size, timeout=timeout)\n"
        "RuntimeError: Connection refused",
        "rendezvous",
        "gloo",
    ),
    # a process group's call with its File line cut (pytorch/pytorch distributed_c10d.py broadcast)
    "dist-broadcast-source-line-connection-reset": (
        "    dist.broadcast(params, src=0)\nRuntimeError: Connection reset by peer",
        "mpi-comm",
        "pytorch",
    ),
}


@pytest.mark.parametrize(("text", "rule", "stack"), list(_LIVE.values()), ids=list(_LIVE))
def test_a_familys_other_wording_seen_live_is_found_before_the_pod_ends(
    text: str, rule: RuleId, stack: str
) -> None:
    entry = Entry(id="t", file="t", stack=stack, where="log", reason=None, expect=rule, text=text)
    assert rule in run_live(entry, end=False).rules
