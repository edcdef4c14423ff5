"""The families the blind set of 2026-11-30f showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines: Slurm's accounting killing a
job over its memory, a container's ``OOMKilled`` as kubectl lists it (``oom``); the kubelet refusing or
evicting a pod for its node's disk (``disk-full``); the c10d store's socket failing its poll, a job's etcd
out of reach (``rendezvous``); a LimitRange's refusal relayed in an API error, a quota refusal wrapped over
lines, a batch queue's event pasted into a log (``quota``); an HCCL communicator's initialisation, oneCCL's
threads, NCCL's socket address (``mpi-comm``); Open MPI's default error handler, torch elastic's record
cut from its header (``mpi-abort``); bash's report of a crash set in markdown (``segfault``); a GPU fault
a person quotes the run raising (``gpu-error``). Each near-miss names a family's words without reporting
its failure: documentation's account of symptoms, a class and its docstring, an explanation, advice.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import fires_saying, replayed, stays_quiet

# id: (text, rule, how it is replayed, what the root cause says, what a step of the remediation says)
_FAMILIES: dict[str, tuple[str, RuleId, dict[str, str], str, str]] = {
    "slurm-step-over-memory": (
        "slurmstepd: error: Step 4121.0 exceeded memory limit (8912345 > 8388608), being killed",
        "oom",
        {"stack": "linux"},
        "Slurm's accounting killed the job",
        "sacct -j",
    ),
    "describe-oomkilled": (
        "Containers:\n  trainer:\n    State:          Running\n    Last State:     Terminated\n"
        "      Reason:       OOMKilled\n      Exit Code:    137",
        "oom",
        {"stack": "kubernetes", "where": "event"},
        "was OOMKilled, exit code 137",
        "resources.limits.memory",
    ),
    "get-pods-oomkilled": (
        "NAME              READY   STATUS      RESTARTS   AGE\nmnist-worker-1    0/1     OOMKilled   2          3m",
        "oom",
        {"stack": "kubernetes", "where": "event"},
        "was OOMKilled",
        "resources.limits.memory",
    ),
    "admitted-under-diskpressure": (
        "The node had condition: [DiskPressure].",
        "disk-full",
        {"stack": "kubernetes", "where": "event", "reason": "Evicted"},
        "DiskPressure",
        "ephemeral-storage",
    ),
    "reclaiming-inodes": (
        "Warning  EvictionThresholdMet  2m  kubelet  Attempting to reclaim inodes",
        "disk-full",
        {"stack": "kubernetes", "where": "event"},
        "attempting to reclaim inodes",
        "DiskPressure",
    ),
    "bash-bus-error-emphasised": (
        "/var/spool/slurmd/job812/slurm_script: line 9:  2231 **Bus error**   ./md_run -i in.lmp",
        "segfault",
        {"stack": "linux"},
        "bus error",
        "",
    ),
    "ompi-errhandler-invalid-rank": (
        "[node7:02231] *** An error occurred in MPI_Send\n[node7:02231] *** reported by process [1234567,3]\n"
        "[node7:02231] *** on communicator MPI_COMM_WORLD\n[node7:02231] *** MPI_ERR_RANK: invalid rank\n"
        "[node7:02231] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
        "[node7:02231] ***    and potentially your MPI job)",
        "mpi-abort",
        {"stack": "openmpi"},
        "MPI_Send returned MPI_ERR_RANK: invalid rank, and the default error handler",
        "",
    ),
    "elastic-record-without-header": (
        "  time      : 2025-01-02_03:04:05\n  host      : gpu-node-2\n  rank      : 5 (local_rank: 1)\n"
        "  exitcode  : 3 (pid: 812)\n  error_file: <N/A>",
        "mpi-abort",
        {"stack": "pytorch"},
        "Rank 5",
        "",
    ),
    "c10d-poll-reset": (
        "[W1104 09:10:11.123456 socket.cpp:460] [c10d] While waitForInput, poolFD failed with (errno: 104 - "
        "Connection reset by peer).",
        "rendezvous",
        {"stack": "pytorch"},
        "polling the socket failed: Connection reset by peer",
        "",
    ),
    "etcd-dial-timeout": (
        'time="2018-01-02T03:04:05Z" level=fatal msg="connecting to etcd failed: dial tcp 10.0.0.5:2379: '
        'i/o timeout"',
        "rendezvous",
        {"stack": "other"},
        "(10.0.0.5:2379: i/o timeout)",
        "etcdctl",
    ),
    "limitrange-minimum-relayed": (
        "kubernetes.client.exceptions.ApiException: (403) Reason: Forbidden HTTP response body: "
        '{"kind":"Status","message":"pods \\"trainer-0\\" is forbidden: [minimum memory usage per Container '
        'is 1Gi, but request is 512Mi]","code":403}',
        "quota",
        {"stack": "kubernetes"},
        "LimitRange allows at least 1Gi memory per Container",
        "limitrange",
    ),
    "exceeded-quota-wrapped": (
        '  message: \'pods "job-worker-0" is forbidden: exceeded quota: team-a,\n'
        "    requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=4,\n"
        "    limited: requests.nvidia.com/gpu=8'",
        "quota",
        {"stack": "kubernetes"},
        "ResourceQuota team-a",
        "describe resourcequota team-a",
    ),
    "kueue-event-pasted": (
        "  Normal   Pending  3s  kueue-admission  couldn't assign flavors to pod set main: insufficient quota "
        "for cpu in flavor default-flavor, 8 more needed",
        "quota",
        {"stack": "kubernetes"},
        "The job's queue held it: Kueue could not fit pod set main",
        "clusterqueue",
    ),
    "hccl-cluster-info": (
        "[ERROR] HCCL(1021,python):2025-01-02-03:04:05.678.901 [op_base.cc:1200][1022][Init][ClusterInfo]"
        "HcclCommInitClusterInfo failed.",
        "mpi-comm",
        {"stack": "other"},
        "HCCL could not set up its transport",
        "hccn_tool",
    ),
    "oneccl-progress-thread": (
        "2024:02:03-04:05:06:(812) |CCL_ERROR| base_thread.cpp:36 start: error while creating progress thread "
        "#1 pthread_create returns 11",
        "mpi-comm",
        {"stack": "other"},
        "oneCCL could not start its worker threads",
        "CCL_WORKER_AFFINITY",
    ),
    "nccl-address-accept-reset": (
        "RuntimeError: NCCL Accept from 10.2.3.4<39012> failed : Connection reset by peer",
        "mpi-comm",
        {"stack": "nccl"},
        "(NCCL)",
        "NCCL_SOCKET_IFNAME",
    ),
    "gpu-fault-quoted-as-raised": (
        "Training ran for an hour, then it raised an error `RuntimeError: CUDA error: unspecified launch "
        "failure` and stopped.",
        "gpu-error",
        {"stack": "pytorch"},
        "launch failure",
        "",
    ),
}


@pytest.mark.parametrize(
    ("text", "rule", "how", "said", "step"), list(_FAMILIES.values()), ids=list(_FAMILIES)
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    text: str, rule: RuleId, how: dict[str, str], said: str, step: str
) -> None:
    fires_saying(text, rule, said, step, **how)


@pytest.mark.parametrize(
    "text",
    [_FAMILIES[name][0] for name in ("describe-oomkilled", "reclaiming-inodes")],
    ids=["describe-oomkilled", "reclaiming-inodes"],
)
def test_a_kubectl_listing_read_as_an_event_is_judged_by_the_outcome(text: str) -> None:
    assert replayed(text, None, stack="kubernetes", where="event", succeed=True).rules == frozenset()


# a family's words named, not reported: documentation's symptoms and explanations, a class and its
# docstring, advice
_QUIET: dict[str, tuple[str, str]] = {
    "symptoms-gpu-oom": (
        "Training pods intermittently fail with CUDA out of memory, especially during evaluation.",
        "pytorch",
    ),
    "symptoms-disk": ("Typical symptoms include No space left on device while pulling layers.", "other"),
    "class-defined": ("class RendezvousClosedError(RendezvousError):", "pytorch"),
    "docstring": (
        '    """Raised when NCCL reports ncclRemoteError: a remote process exited or there was a network '
        'error."""',
        "nccl",
    ),
    "explained": (
        "The RendezvousClosedError occurs when another node closed the rendezvous before this one joined.",
        "pytorch",
    ),
    "indicates": (
        "A Segmentation fault (core dumped) here typically indicates a bad extension build.",
        "linux",
    ),
    "slurm-advice": (
        "If you see `Job 12 exceeded memory limit (900 > 800), being killed`, raise --mem.",
        "linux",
    ),
    "oneccl-advice": (
        "Set CCL_WORKER_AFFINITY if you see 'failed to start worker # 0' from oneCCL.",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
