"""The families the blind set of 2026-11-29b showed missing, in other wordings than its own.

Each failure is a wording of its family from another printer or in another shape: the kubelet's
eviction manager and volume manager however their events reach the watcher (a ``get events`` or
``describe`` listing, a status, without the event's reason); a quota refusal a terminal wrapped;
NCCL's p2p transport failing an IPC handle (CUDA or HIP); the MPICH family's PMI client aborting in
``MPI_Init``; libfabric providers unable to register memory; Open MPI's OFI MTL; PRRTE's daemons;
Charm++ over OFI; XGBoost's collective failing; torch's watchdog wrapped; ROCm's runtime exceptions;
XLA's BFC allocator giving up; faulthandler's report tagged by mpirun; torch elastic's etcd backend.
Each near-miss is the same words where nothing failed (a diff of a help text, a title quoting an
error, an allocator's retried request, an eviction for memory).
"""

from __future__ import annotations

import pytest

from tests.rules.corpus_replay import root_cause_of as _cause
from tests.rules.corpus_replay import rules_fired as _rules

# ------------------------------------------------------------------ disk-full


@pytest.mark.parametrize(
    "text",
    [
        "12m   Warning   Evicted   pod/trainer-worker-1   The node was low on resource: ephemeral-storage. "
        "Threshold quantity: 4Gi, available: 1520Mi.",
        "status:\n  message: 'Pod ephemeral local storage usage exceeds the total limit of containers 10Gi. '\n"
        "  phase: Failed\n  reason: Evicted",
        'Message:  Usage of EmptyDir volume "dshm" exceeds the limit "2Gi".',
        "The node was low on resource: inodes. Container worker was using 12Ki, request is 0, has larger "
        "consumption of inodes.",
    ],
    ids=["get-events-listing", "status-yaml", "describe-message", "inodes-request-0"],
)
def test_the_eviction_managers_words_are_a_full_disk_however_the_event_is_framed(text: str) -> None:
    assert _rules(text, "disk-full", where="event") == {"disk-full"}


@pytest.mark.parametrize(
    "text",
    [
        'Warning  FailedMount  3m  kubelet  MountVolume.SetUp failed for volume "config" : write '
        "/var/lib/kubelet/pods/1f/volumes/kubernetes.io~configmap/config/..2026_01_01/train.yaml: "
        "no space left on device",
        "7m   Warning   FailedCreatePodSandBox   pod/trainer-0   Failed to create pod sandbox: rpc error: code = "
        "Unknown desc = mkdir /var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/ab: no space left on "
        "device",
    ],
    ids=["describe-failedmount-configmap", "listing-sandbox"],
)
def test_the_kubelets_full_disk_without_the_events_reason_is_still_its(text: str) -> None:
    assert _rules(text, "disk-full", where="event") == {"disk-full"}


def test_the_sentence_names_what_the_kubelet_could_not_do_from_the_listing() -> None:
    text = (
        'Warning  FailedMount  1m  kubelet  MountVolume.SetUp failed for volume "token" : write '
        "/var/lib/kubelet/pods/9c/volumes/kubernetes.io~projected/token/..data/token: no space left on device"
    )
    assert "could not set up a volume" in _cause(text, "disk-full", stack="other", where="event")


@pytest.mark.parametrize(
    "text",
    [
        "5m   Warning   Evicted   pod/trainer-0   The node was low on resource: memory. Container trainer was "
        "using 30Gi, which exceeds its request of 8Gi.",
        "Backup of the checkpoints to the bucket failed: no space left on device",
    ],
    ids=["eviction-for-memory", "not-the-kubelets-words"],
)
def test_an_event_without_reason_and_without_the_kubelets_disk_words_is_no_full_disk(text: str) -> None:
    assert "disk-full" not in _rules(text, None, where="event")


def test_a_persons_report_quoting_what_the_program_printed_is_read_as_that_output() -> None:
    text = (
        "When I ran the export step on my laptop it printed an error: OSError: [Errno 28] No space left on "
        "device: '/home/me/export/model.onnx'"
    )
    assert _rules(text, "disk-full", stack="pytorch") == {"disk-full"}


def test_a_persons_advice_about_an_error_is_still_prose() -> None:
    text = "If you get an error: No space left on device, clear the cache of your notebook before saving."
    assert _rules(text, None, stack="pytorch") == set()


# ------------------------------------------------------------------ quota


@pytest.mark.parametrize(
    "text",
    [
        'Error creating: pods "pytorch-worker-3" is forbidden: exceeded quota: gpu-quota,\n'
        "requested: requests.nvidia.com/gpu=8,\nused: requests.nvidia.com/gpu=24,\n"
        "limited: requests.nvidia.com/gpu=32",
        'pods "mpi-launcher-x" is forbidden: exceeds quota: team-b, requested: pods=1, used: pods=20,\n'
        "   limited: pods=20",
    ],
    ids=["wrapped-after-each-field", "exceeds-indented"],
)
def test_a_quota_refusal_a_terminal_wrapped_is_read_whole(text: str) -> None:
    assert _rules(text, "quota", where="event", reason="FailedCreate") == {"quota"}


# ------------------------------------------------------------------ mpi-comm


@pytest.mark.parametrize(
    "text",
    [
        "gpu-node-3:4411:4470 [5] NCCL WARN failed to open CUDA IPC handle : 201 invalid device context",
        "gpu-node-3:4411:4470 [2] transport/p2p.cc:301 NCCL WARN cudaIpcGetMemHandle failed : invalid argument",
        "mi300:812:880 [7] /opt/rccl/src/transport/p2p.cc:330 NCCL WARN hipIpcOpenMemHandle failed : "
        "invalid device pointer",
    ],
    ids=["nccl-open-handle", "nccl-get-handle", "rccl-open-handle"],
)
def test_nccls_p2p_transport_failing_an_ipc_handle_is_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="nccl") == {"mpi-comm"}
    assert "p2p transport" in _cause(text, "mpi-comm", stack="nccl")


@pytest.mark.parametrize(
    "text",
    [
        "[cli_0]: aborting job:\nFatal error in MPI_Init_thread:\nOther MPI error",
        "[cli_5]: aborting job:\nFatal error in PMPI_Init:\nOther MPI error",
    ],
    ids=["mpi-init-thread", "pmpi-init"],
)
def test_the_mpich_familys_abort_in_mpi_init_is_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="mvapich") == {"mpi-comm"}


@pytest.mark.parametrize(
    "text",
    [
        "libfabric:77:efa:mr:efa_mr_reg():260<warn> Unable to register MR buf (Bad address): 0x7f00aa00 len: 4096",
        "libfabric:902:1700000000::verbs:mr:vrb_mr_reg():122<warn> Unable to register MR: Operation not permitted",
    ],
    ids=["efa", "verbs"],
)
def test_a_libfabric_provider_unable_to_register_memory_is_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="libfabric") == {"mpi-comm"}
    assert "register memory" in _cause(text, "mpi-comm", stack="libfabric")


@pytest.mark.parametrize(
    "text",
    [
        "[node-7:2201] mtl_ofi.c:412: Error returned from fi_cq_readerr: Input/output error(-5).\n"
        "*** The Open MPI OFI MTL is aborting the MPI job (via exit(3)).",
        "[node-2:91] ompi/mca/mtl/ofi/mtl_ofi.h:530: Error returned by request event callback: -113.",
    ],
    ids=["cq-readerr", "event-callback"],
)
def test_open_mpis_ofi_mtl_failing_a_completion_is_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="openmpi") == {"mpi-comm"}
    assert "OFI MTL" in _cause(text, "mpi-comm", stack="openmpi")


@pytest.mark.parametrize(
    "text",
    [
        "PRRTE has lost communication with a remote daemon.",
        "PRRTE was unable to reliably start one or more daemons.",
    ],
    ids=["lost-daemon", "start-daemons"],
)
def test_prrtes_daemons_in_its_own_spelling_are_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="openmpi") == {"mpi-comm"}


def test_charm_plus_plus_over_ofi_failing_a_send_is_a_communication_failure() -> None:
    text = (
        "------------- Processor 3 Exiting: Called CmiAbort ------------\n"
        "Reason: OFI::LrtsAdvanceCommunication::fi_trecv error"
    )
    assert _rules(text, "mpi-comm", stack="libfabric") == {"mpi-comm"}
    assert "Charm++" in _cause(text, "mpi-comm", stack="libfabric")


def test_xgboosts_collective_failing_is_a_communication_failure() -> None:
    text = "[09:12:44] /opt/xgboost/rabit/src/allreduce_base.cc:552: Broadcast failed"
    assert _rules(text, "mpi-comm") == {"mpi-comm"}
    assert "rabit" in _cause(text, "mpi-comm", stack="other")


def test_torchs_watchdog_wrapped_inside_the_works_fields_is_read() -> None:
    text = (
        "[rank5]:[E101 10:00:00.000000000 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=91, OpType=ALLREDUCE,\n"
        " NumelIn=4096, NumelOut=4096, Timeout(ms)=600000) ran for 600321 milliseconds before timing out."
    )
    assert _rules(text, "mpi-comm", stack="pytorch") == {"mpi-comm"}
    assert "ALLREDUCE timed out" in _cause(text, "mpi-comm", stack="pytorch")


# ------------------------------------------------------------------ gpu-error, gpu-oom, segfault


@pytest.mark.parametrize(
    "text",
    [
        "HW Exception by GPU node-4 (Agent handle: 0x5581f0a0) reason :GPU Hang",
        "Memory access fault by GPU node-2 (Agent handle: 0x55d0e0) on address 0x7f3c00000000. Reason: Page "
        "not present or supervisor privilege.",
    ],
    ids=["hw-exception", "memory-access-fault"],
)
def test_roc_ms_runtime_exceptions_are_a_gpu_error(text: str) -> None:
    assert _rules(text, "gpu-error", stack="pytorch") == {"gpu-error"}


def test_the_bfc_allocator_giving_up_on_a_request_is_a_gpu_oom() -> None:
    text = (
        "2026-01-02 03:04:05.000001: W external/local_tsl/tsl/framework/bfc_allocator.cc:485] Allocator "
        "(GPU_1_bfc) ran out of memory trying to allocate 20.00GiB (rounded to 21474836480)requested by op"
    )
    assert _rules(text, "gpu-oom", stack="jax") == {"gpu-oom"}


@pytest.mark.parametrize(
    "text",
    [
        "W tensorflow/core/common_runtime/bfc_allocator.cc:243] Allocator (GPU_0_bfc) ran out of memory trying "
        "to allocate 2.10GiB with freed_by_count=0. The caller indicates that this is not a failure, but may "
        "mean that there could be performance gains if more memory were available.",
        "W tsl/framework/bfc_allocator.cc:485] Allocator (gpu_host_bfc) ran out of memory trying to allocate "
        "4.00GiB (rounded to 4294967296)requested by op",
    ],
    ids=["retried-request", "host-allocator"],
)
def test_the_bfc_allocators_retried_or_host_request_is_no_gpu_oom(text: str) -> None:
    assert "gpu-oom" not in _rules(text, None, stack="jax")


def test_faulthandlers_report_tagged_by_mpirun_in_each_write_is_a_segfault() -> None:
    text = "[0,2]<stdout>:Fatal Python error: [0,2]<stdout>:Bus error[0,2]<stdout>:"
    assert _rules(text, "segfault", stack="horovod") == {"segfault"}


# ------------------------------------------------------------------ rendezvous


@pytest.mark.parametrize(
    "text",
    [
        '  File "/usr/lib/python3/site-packages/etcd/client.py", line 1000, in _handle_server_response\n'
        "etcd.EtcdKeyNotFound: Key not found : /torchelastic/p2p/run_job42/rdzv/active_version",
        'etcd.EtcdConnectionFailed: Connection to etcd failed due to MaxRetryError("HTTPConnectionPool('
        "host='etcd', port=2379)\")",
        # a title reporting the failure with the error it quotes (not naming it as a topic)
        'Elastic agent crashes with "etcd.EtcdKeyNotFound: Key not found : /torchelastic/p2p/run_7"',
    ],
    ids=["key-not-found", "connection-failed", "title-reporting-it"],
)
def test_torch_elastics_etcd_backend_failing_is_a_rendezvous(text: str) -> None:
    assert _rules(text, "rendezvous", stack="pytorch") == {"rendezvous"}


# ------------------------------------------------------------------ near-misses


@pytest.mark.parametrize(
    "text",
    [
        "@@ -40,3 +40,3 @@\n-An ORTE daemon has unexpectedly failed after launch and before\n"
        "+A PRRTE daemon has unexpectedly failed after launch and before",
        "-PRRTE has lost communication with a remote daemon.\n+PRRTE has lost communication with its daemon.",
    ],
    ids=["diff-with-hunk", "diff-pair"],
)
def test_a_diff_of_a_help_text_raises_nothing(text: str) -> None:
    assert _rules(text, None, stack="openmpi") == set()
