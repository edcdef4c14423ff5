"""The families the blind set of 2026-11-30t showed missing, and its false alarms, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines: torch's watchdog counters standing
alone, Open MPI's TCP transport failing to bind its local socket, charmrun's request socket closed and its wait
for a node program, Dask's scheduler writing to a closed comm, an MPICH error stack raised by mpi4py
(``mpi-comm``); systemd's unit killed by the OOM killer, the PBS epilogue of NASA's HECC systems and a
``kubectl get pods`` listing padded to a long name (``oom``); TensorFlow's master waiting for a task, a gRPC
server and torchft's lighthouse unable to bind their port (``rendezvous``); TensorFlow's
``ResourceExhaustedError`` of its allocator (``gpu-oom``); XGBoost4J-Spark's tracker ending with a code
(``mpi-abort``); a quota refusal in a Kubernetes condition listed as YAML (``quota``).

Each near-miss names a family's words without reporting its failure: ``No space left on device`` from a call
whose ENOSPC is a kernel table's limit (System V IPC, epoll), no disk's; a bug report's expected-behaviour
field or a test's expected value; the tracker ending with code 0.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, the replay's stack)

_KERNEL_LIMIT: dict[str, tuple[str, str]] = {
    # a video player's shared-memory image, System V's segment table full
    "shmget-segment-table-full": (
        "[vo/x11] shmget(IPC_PRIVATE, 8294400) failed: No space left on device",
        "linux",
    ),
    # PostgreSQL at start-up, SEMMNI / SEMMNS spent
    "postgres-could-not-create-semaphores": (
        "2024-03-01 10:00:00.000 UTC [1] FATAL:  could not create semaphores: No space left on device",
        "linux",
    ),
    # an event loop past fs.epoll.max_user_watches
    "epoll-ctl-max-user-watches": (
        "ERROR: epoll_ctl(EPOLL_CTL_ADD, fd=412) failed: No space left on device",
        "other",
    ),
    # System V message queues past MSGMNI
    "msgget-queue-table-full": (
        "msgget(0x5101, IPC_CREAT) failed: [Errno 28] No space left on device",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_KERNEL_LIMIT.values()), ids=list(_KERNEL_LIMIT))
def test_enospc_from_a_kernel_tables_limit_is_no_full_disk(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


def test_enospc_of_a_write_still_counts() -> None:
    text = "OSError: [Errno 28] No space left on device: '/scratch/run-7/ckpt/step_2000.pt'"
    fires_saying(text, "disk-full", "no space left on device", "df", stack="pytorch")


_EXPECTED: dict[str, tuple[str, str]] = {
    # a bug report's field, its words in inline code
    "bug-report-expected-field": (
        "**Expected:** the launcher prints `CUDA error: out of memory` once and exits 1.",
        "pytorch",
    ),
    # a template's heading, the behaviour under it in a sentence
    "expected-behavior-heading": (
        "### Expected behavior\n"
        "The writer should fail with `OSError: [Errno 28] No space left on device` instead of hanging.",
        "pytorch",
    ),
    # a test's expected value
    "a-tests-expected-value": ("Expected: reason: OOMKilled, exitCode: 137", "kubernetes"),
    # the field named for the result
    "expected-result-field": (
        "- **Expected result:** the pod shows `Reason: OOMKilled` in kubectl describe.",
        "kubernetes",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_EXPECTED.values()), ids=list(_EXPECTED))
def test_what_a_report_expects_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


def test_what_a_report_says_it_got_still_counts() -> None:
    # the actual behaviour beside the expected one: the run's line
    text = (
        "**Expected:** training runs.\n**Actual:** it crashed and gave me an error: CUDA error: out of memory"
    )
    fires_saying(text, "gpu-oom", "out of memory", "batch", stack="pytorch")


# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_MPI_COMM: dict[str, Wording] = {
    # torch's watchdog counters (ProcessGroupNCCL.cpp, watchdogHandler) with its newer PG prefix
    "nccl-watchdog-counters-alone": (
        "[rank5]:[E1103 10:00:00.000000000 ProcessGroupNCCL.cpp:1688] [PG ID 0 PG GUID 0(default_pg) Rank 5] "
        "Timeout at NCCL work: 48213, last enqueued NCCL work: 48214, last completed NCCL work: 48212.",
        "the NCCL watchdog saw a collective fail or time out",
        "NCCL_DEBUG",
        "nccl",
    ),
    # Open MPI's TCP BTL on one line, its ephemeral ports spent
    "ompi-btl-tcp-local-bind-in-use": (
        "[node7][[5521,1],33][btl_tcp_endpoint.c:720:mca_btl_tcp_endpoint_start_connect] bind on local "
        "address (192.168.1.7:0) failed: Address already in use (98)",
        "could not bind the local socket it connects from",
        "ip_local_port_range",
        "openmpi",
    ),
    # charmrun's request socket to another node, the reason under its two dashes
    "charmrun-request-socket-closed": (
        "Charmrun> error on request socket to node 5 'gpu-node-12'--\nSocket closed before recv.",
        "charmrun lost its connection to a node program",
        "charmrun",
        "other",
    ),
    # charmrun's colon form of the wait for its node program
    "charmrun-attach-timeout-colon-prefix": (
        "Charmrun: error attaching to node 'cn-0042':\nTimeout waiting for node-program to connect",
        "charmrun timed out waiting for a node program",
        "charmrun",
        "other",
    ),
    # Dask's comm layer raising its closed comm under a worker's logger
    "dask-worker-comm-closed-error": (
        "distributed.worker - ERROR - failed during get data with tcp://10.0.3.7:40215 -> tcp://10.0.3.9:38111\n"
        "distributed.comm.core.CommClosedError: in <TCP (closed) local=tcp://10.0.3.7:40215 "
        "remote=tcp://10.0.3.9:38111>: Stream is closed",
        "communication failure (Dask distributed)",
        "distributed.comm.timeouts",
        "other",
    ),
    # MPICH's error stack raised by mpi4py on a receive, its TCP netmod naming the reset
    "mpi4py-mpich-recv-connection-reset": (
        "mpi4py.MPI.Exception: Other MPI error, error stack:\n"
        "PMPI_Recv(173).............: MPI_Recv(buf=0x7f2a10, count=1024, MPI_DOUBLE, src=3, tag=0, "
        "MPI_COMM_WORLD, status=0x1) failed\n"
        "MPIDI_CH3I_Progress(623)...: fail failed\n"
        "MPID_nem_tcp_connpoll(1845): Communication error with rank 3: Connection reset by peer",
        "a connection to another rank was reset",
        "sidecar",
        "mpich",
    ),
    # the same on a broadcast whose stack says no more than its class
    "mpi4py-mpich-bcast-other-error": (
        "mpi4py.MPI.Exception: Other MPI error, error stack:\n"
        "PMPI_Bcast(432)....: MPI_Bcast(buf=0x55d0c8, count=1, MPI_INT, root=0, MPI_COMM_WORLD) failed\n"
        "(unknown)(): Other MPI error",
        "a rank's MPI call failed",
        "NetworkPolicies",
        "mpich",
    ),
}


_OOM: dict[str, Wording] = {
    # systemd's unit check on a kubepods slice
    "systemd-kubepods-slice-oom-killer": (
        "Jan 05 03:12:44 gpu-node-3 systemd[1]: kubepods-burstable-pod7a1c.slice: A process of this unit has "
        "been killed by the OOM killer.",
        "as systemd reported it",
        "MemoryMax=",
        "linux",
    ),
    # a service's result after the kill
    "systemd-service-result-oom-kill": (
        "Feb 11 22:01:09 trainer-host systemd[1]: train-job.service: Failed with result 'oom-kill'.",
        "as systemd reported it",
        "OOMPolicy=",
        "linux",
    ),
    # the HECC epilogue on another of its systems, on one line
    "hecc-aitken-epilogue-one-line": (
        "Your Aitken job 8812345.pbspl1.nas.nasa.gov terminated due to one or more nodes running out of "
        "memory.",
        "NASA's HECC",
        "mpiprocs=",
        "linux",
    ),
    # kubectl's listing, its NAME column padded to a long name
    "kubectl-get-pods-padded-name-column": (
        "trainer-worker-0-with-a-long-generated-name-abcde                   0/1     OOMKilled   3          12m",
        "out of memory",
        "resources.limits.memory",
        "kubernetes",
    ),
}


_RENDEZVOUS: dict[str, Wording] = {
    # TensorFlow's master at glog's level I, a worker task missing through two of its ten-second rounds
    "tf-master-createsession-worker-task": (
        "2019-01-01 00:00:10.000000: I tensorflow/core/distributed_runtime/master.cc:267] CreateSession still "
        "waiting for response from worker: /job:worker/replica:0/task:3\n"
        "2019-01-01 00:00:20.000000: I tensorflow/core/distributed_runtime/master.cc:267] CreateSession still "
        "waiting for response from worker: /job:worker/replica:0/task:3",
        "/job:worker/replica:0/task:3 never answered",
        "TF_CONFIG",
        "tensorflow",
    ),
    # TensorFlow 2's own words on its server
    "tf2-could-not-start-grpc-server": (
        "tensorflow.python.framework.errors_impl.UnknownError: Could not start gRPC server",
        "could not start the gRPC server its cluster's tasks meet at",
        "TF_CONFIG",
        "tensorflow",
    ),
    # gRPC core's JSON on an IPv4 address, the port read from its target
    "grpc-core-json-bind-in-use-ipv4": (
        'E0101 00:00:00.000000 140 server_chttp2.cc:40] {"created":"@1600000000.000000000","description":"No '
        'address added out of total 1 resolved","file":"src/core/ext/transport/chttp2/server/chttp2_server.cc",'
        '"referenced_errors":[{"description":"Unable to configure socket","referenced_errors":[{"description":'
        '"Address already in use","errno":98,"os_error":"Address already in use","syscall":"bind"}]}],'
        '"target_address":"ipv4:0.0.0.0:2222"}',
        "port 2222 was already in use",
        "ss -ltnp",
        "tensorflow",
    ),
    # torchft's lighthouse started from Python, Rust's io error raised under it
    "torchft-lighthouse-server-from-python": (
        'File "/opt/venv/lib/python3.11/site-packages/torchft/manager.py", line 210, in __init__\n'
        '    self._lighthouse = LighthouseServer(bind="[::]:29510", min_replicas=2)\n'
        "RuntimeError: Address already in use (os error 98)",
        "could not start torchft's lighthouse",
        "TORCHFT_LIGHTHOUSE",
        "pytorch",
    ),
}


_GPU_OOM: dict[str, Wording] = {
    # TensorFlow's Python class of the allocator's status, raised whole
    "tf-resource-exhausted-error-class": (
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Failed to allocate request for "
        "1.00GiB (1073741824B) on device ordinal 3",
        "GPU out of memory (JAX/XLA: RESOURCE_EXHAUSTED)",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "tensorflow",
    ),
}


_MPI_ABORT: dict[str, Wording] = {
    # RabitTracker's process logger on a worker's failure, another code
    "xgboost4j-tracker-process-ends-255": (
        "19/02/03 10:11:12 INFO RabitTracker$TrackerProcessLogger: Tracker Process ends with exit code 255",
        "under XGBoost4J-Spark's Rabit tracker",
        "spark.task.cpus",
        "other",
    ),
}


_QUOTA: dict[str, Wording] = {
    # a controller's condition in YAML, the quota refusal in its message
    "yaml-condition-message-exceeded-quota": (
        "  conditions:\n"
        '  - lastTransitionTime: "2025-01-02T03:04:05Z"\n'
        '    message: \'pods "trainer-worker-1" is forbidden: exceeded quota: gpu-quota, requested: '
        "requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8'\n"
        "    reason: FailedCreate",
        "ResourceQuota gpu-quota",
        "describe resourcequota",
        "kubernetes",
    ),
}


_TABLES: dict[RuleId, dict[str, Wording]] = {
    "mpi-comm": _MPI_COMM,
    "oom": _OOM,
    "rendezvous": _RENDEZVOUS,
    "gpu-oom": _GPU_OOM,
    "mpi-abort": _MPI_ABORT,
    "quota": _QUOTA,
}


@pytest.mark.parametrize(WORDING_ARGS, wordings(_TABLES))
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


_NEAR: dict[str, tuple[str, str]] = {
    # the tracker done: code 0
    "xgboost4j-tracker-ends-with-zero": (
        "19/02/03 10:11:12 INFO XGBoostSpark: Rabit returns with exit code 0",
        "other",
    ),
    # TensorFlow's master waiting once while its tasks start (the catalog's ordinary line, then the session)
    "tf-master-waits-once-then-runs": (
        "2019-01-01 00:00:10.000000: I tensorflow/core/distributed_runtime/master.cc:267] CreateSession still "
        "waiting for response from worker: /job:ps/replica:0/task:1\n"
        "2019-01-01 00:00:14.000000: I tensorflow/core/distributed_runtime/master_session.cc:1161] Start master "
        "session 3a1b2c with config:",
        "tensorflow",
    ),
    # a sentence on the counters, no watchdog's line
    "nccl-counters-in-a-sentence": (
        "The flight recorder dump shows the last completed NCCL work lagging by one on rank 5.",
        "nccl",
    ),
    # a page's list item in Markdown, a word and a colon
    "markdown-list-item-reason": (
        "- reason: the container went past its limit, so the kubelet restarted it (no OOMKilled seen)",
        "kubernetes",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_NEAR.values()), ids=list(_NEAR))
def test_a_familys_near_miss_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
