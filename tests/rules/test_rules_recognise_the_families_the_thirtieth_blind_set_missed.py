"""The families the blind set of 2026-11-30v showed missing, and its false alarm, in other wordings than its own.

Each near-miss is a page's demonstration introducing the output of the code it shows (``The resulting output
is:``, ``Below is the resulting traceback:``, ``This produces the following error:``), in other words than the
set's README; a writer's own run (``I … got the following:``) beside them still counts.

Each failure is a wording of its family written apart from the set's lines: Julia's Distributed losing a worker
(``mpi-abort``), its workers waiting for a master that never connected and Dask's scheduler never reached
(``rendezvous``), a Julia worker's peer refusing it, MPI_ERR_TRUNCATE as wrappers of MPI_Error_string print
it, Ray's GCS marking a node dead, CANN's stream sync timeout (``mpi-comm``); Azure Machine Learning's
subscription quotas (``quota``); CUDA.jl's OutOfGPUMemoryError and a CUDA call checked as file(line)
(``gpu-oom``); HTCondor's memory holds (``oom``); Gadi's jobfs (``disk-full``); amdgpu's L2 protection fault
status (``gpu-error``); Charm++'s caught signal (``segfault``).
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, the replay's stack)

_DEMONSTRATED: dict[str, tuple[str, str]] = {
    # a README's example, the allocator's words in a fence below the sentence
    "the-resulting-output-is-fenced": (
        "The resulting output is:\n\n```\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; "
        "15.78 GiB total capacity; 12.10 GiB already allocated)\n```",
        "pytorch",
    ),
    # a tutorial's traceback below the sentence, unfenced
    "below-is-the-resulting-traceback": (
        "Below is the resulting traceback:\nOSError: [Errno 28] No space left on device: '/tmp/ckpt'",
        "pytorch",
    ),
    # a page's account of what its snippet does
    "this-produces-the-following-error": (
        "Calling it on a freed buffer, this produces the following error:\nSegmentation fault (core dumped)",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_DEMONSTRATED.values()), ids=list(_DEMONSTRATED))
def test_a_pages_demonstration_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


_STILL_REPORTED: dict[str, tuple[str, RuleId, str, str, str]] = {
    # the writer's own run, the same colon ending the sentence
    "i-ran-it-and-got-the-following": (
        "I ran it on two nodes and got the following:\nRuntimeError: CUDA out of memory. Tried to allocate "
        "1.00 GiB (GPU 1; 39.59 GiB total capacity; 38.20 GiB already allocated)",
        "gpu-oom",
        "CUDA out of memory",
        "Lower the per-GPU batch size",
        "pytorch",
    ),
}


@pytest.mark.parametrize(
    ("text", "rule", "said", "step", "stack"), list(_STILL_REPORTED.values()), ids=list(_STILL_REPORTED)
)
def test_a_report_beside_a_demonstration_still_counts(
    text: str, rule: RuleId, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_MPI_ABORT: dict[str, Wording] = {
    # the master's line on a worker gone, Julia 1.9's unhandled task under it
    "julia-worker-terminated-eof": (
        "Worker 5 terminated.\nUnhandled Task ERROR: EOFError: read end of file",
        "Julia's Distributed lost worker 5",
        "pmap(",
        "other",
    ),
    # the exception before Julia 1.5, no worker named
    "julia-process-exited-exception-bare": (
        "ERROR: ProcessExitedException()\nStacktrace:\n [1] remotecall_fetch(f::Function, w::Worker)",
        "a call on it raised ProcessExitedException",
        "'Worker N terminated.'",
        "other",
    ),
}


_RENDEZVOUS: dict[str, Wording] = {
    # a worker relayed by the master, a longer JULIA_WORKER_TIMEOUT
    "julia-master-could-not-connect-120": (
        "\tFrom worker 3:\tMaster process (id 1) could not connect within 120.0 seconds.\n"
        "\tFrom worker 3:\texiting.",
        "the master never connected to in time",
        "JULIA_WORKER_TIMEOUT",
        "other",
    ),
    # Dask's handshake with the scheduler timing out
    "dask-handshake-scheduler-port": (
        "OSError: Timed out during handshake while connecting to tcp://10.0.0.5:8786 after 30 s",
        "could not reach Dask's scheduler",
        "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT",
        "other",
    ),
}


_MPI_COMM: dict[str, Wording] = {
    # a worker's peer refused, Julia 1.9's frame of its connection
    "julia-connect-to-peer-refused": (
        "ERROR: LoadError: TaskFailedException\n"
        "    nested task error: IOError: connect: connection refused (ECONNREFUSED)\n"
        "    Stacktrace:\n"
        "     [1] connect_to_peer(manager::SlurmManager, rpid::Int64, wconfig::WorkerConfig)\n"
        "       @ Distributed ~/julia-1.9/share/julia/stdlib/v1.9/Distributed/src/process_messages.jl:358",
        "a Julia worker's connection to another worker was refused",
        "Julia's Distributed: every worker connects to every other",
        "other",
    ),
    # mpi4py's recv on a message longer than its buffer
    "mpi4py-recv-err-truncate": (
        '  File "mpi4py/MPI/Comm.pyx", line 1438, in mpi4py.MPI.Comm.recv\n'
        "mpi4py.MPI.Exception: MPI_ERR_TRUNCATE: message truncated",
        "MPI_ERR_TRUNCATE",
        "MPI_Get_count",
        "other",
    ),
    # Ray 2's wording, the node's address and name
    "ray-node-marked-dead-address-name": (
        "(raylet) The node with node id: 3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c and address: "
        "10.0.3.7 and node name: 10.0.3.7 has been marked dead because the detector has missed too many "
        "heartbeats from it.",
        "Ray's GCS marked a node of the cluster dead",
        "raylet.out",
        "other",
    ),
    # CANN's runtime log, a stream's own sync call
    "cann-runtime-stream-sync-timeout": (
        "[ERROR] RUNTIME(12345,python):2024-05-01-10:00:00.123.456 [stream.cc:1002]EE1002: Stream synchronize "
        "timeout. rtStreamSynchronizeWithTimeout execute failed, reason=[stream sync timeout]",
        "an NPU's stream did not finish its tasks",
        "hccn_tool",
        "other",
    ),
}


_QUOTA: dict[str, Wording] = {
    # a GPU cluster's quota, raised by the SDK
    "azureml-out-of-gpu-cluster-quota": (
        "azureml.exceptions.ComputeTargetException: OutOfQuota: Not enough cluster GPU quota. The amount of "
        "additional GPU quota requested is 4, and you are currently using 0. Your amount of maximum quota is 0.",
        "not enough cluster GPU quota (4 more requested, 0 in use of 0)",
        "Quota page",
        "other",
    ),
    # another VM family's vCPUs, the CLI's error line
    "azureml-family-vcpu-quota-cli": (
        "ERROR: The specified subscription has a Standard NCSv3 family vCPU quota of 12 and is less than the "
        "requested job node count of 2 which maps to 24 vCPUs.",
        "Standard NCSv3 family vCPU quota is 12 and the job's nodes map to 24 vCPUs",
        "max_instances",
        "other",
    ),
    # the workspace provider's count
    "azureml-cluster-core-quota-reached-provider": (
        "ClusterCoreQuotaReached: Operation results in exceeding quota limits of "
        "Microsoft.MachineLearningServices/workspaces. Maximum allowed: 2, Current in use: 2.",
        "quota of Microsoft.MachineLearningServices/workspaces is reached (maximum 2, 2 in use)",
        "request an increase",
        "other",
    ),
}


_GPU_OOM: dict[str, Wording] = {
    # CUDA.jl's exception with its size and the pool's status under it
    "cuda-jl-out-of-gpu-memory-trying": (
        "ERROR: LoadError: Out of GPU memory trying to allocate 2.500 GiB\n"
        "Effective GPU memory usage: 99.71% (15.730 GiB/15.775 GiB)",
        "CUDA.jl's OutOfGPUMemoryError",
        "CUDA.reclaim()",
        "other",
    ),
    # XGBoost's check of a call in its partitioner, raised as its error
    "xgboost-row-partitioner-cu-line": (
        "xgboost.core.XGBoostError: [05:11:20] /xgboost/src/tree/gpu_hist/row_partitioner.cu(58): out of memory",
        "a CUDA call a library checked",
        "max_bin",
        "other",
    ),
}


_OOM: dict[str, Wording] = {
    # the starter's enforced limit in the job's event log
    "htcondor-gone-over-memory-limit": (
        "012 (4211.000.000) 2024-03-01 10:00:00 Job was held.\n"
        "\tJob has gone over memory limit of 4096 megabytes. Peak usage: 4300 megabytes.",
        "HTCondor",
        "request_memory",
        "other",
    ),
    # a job's own periodic hold policy
    "htcondor-periodic-hold-memory": (
        "4211.0   alice    3/1  10:00 Job in status 2 put on hold by PERIODIC_HOLD due to memory usage 9000000.",
        "HTCondor",
        "condor_release",
        "other",
    ),
}


_DISK_FULL: dict[str, Wording] = {
    # a GPU node's default jobfs
    "gadi-jobfs-default-quota": (
        "Job 98765432.gadi-pbs killed due to exceeding jobfs quota. Quota: 100.0MB, Used: 1.2GB, Host: "
        "gadi-gpu-v100-0031",
        "node-local disk (jobfs)",
        "-l jobfs=",
        "linux",
    ),
}


_GPU_ERROR: dict[str, Wording] = {
    # an older GPU's register, no page-fault line kept
    "amdgpu-vm-l2-protection-fault-status": (
        "[  812.331002] amdgpu 0000:83:00.0: amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00040B3A",
        "GPU page fault",
        "AMD_SERIALIZE_KERNEL",
        "linux",
    ),
}


_SEGFAULT: dict[str, Wording] = {
    # a partitioned job's processor, a segmentation violation
    "charm-partition-caught-signal-segv": (
        "------------- Partition 1 Processor 12 Exiting: Caught Signal ------------\n"
        "Reason: segmentation violation\n[12] Stack Traceback:",
        "segmentation fault (SIGSEGV)",
        "Read the backtrace",
        "other",
    ),
    # the same banner on a bus error
    "charm-caught-signal-bus-error": (
        "------------- Processor 7 Exiting: Caught Signal ------------\nReason: bus error",
        "bus error (SIGBUS)",
        "Read the backtrace",
        "other",
    ),
}


_TABLES: dict[RuleId, dict[str, Wording]] = {
    "mpi-abort": _MPI_ABORT,
    "rendezvous": _RENDEZVOUS,
    "mpi-comm": _MPI_COMM,
    "quota": _QUOTA,
    "gpu-oom": _GPU_OOM,
    "oom": _OOM,
    "disk-full": _DISK_FULL,
    "gpu-error": _GPU_ERROR,
    "segfault": _SEGFAULT,
}


@pytest.mark.parametrize(WORDING_ARGS, wordings(_TABLES))
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)
