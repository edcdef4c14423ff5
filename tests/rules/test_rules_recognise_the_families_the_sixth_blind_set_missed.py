"""The families the blind set of 2026-11-29 showed missing, in other wordings than its own.

Each failure is a wording of its family from another printer or in another shape (the kubelet's
eviction manager in each of its ephemeral-storage messages; the c10d store's server unable to bind
its port in newer and older torch; the store counting the clients that joined; Open MPI help blocks
a tail cut off; PMIx / PRRTE losing their server; MPICH's ch4:ofi polling a failed completion;
ps-lite's van; Ray Train re-raising torch's DistBackendError; Hydra's account of a process that
died of a signal; Open MPI's local abort of a call outside MPI_Init..MPI_Finalize); each near-miss
is the same words where nothing failed (an eviction for memory, a count of zero errors, a handler).
"""

from __future__ import annotations

import pytest

from consumers.rules import RuleEngine
from controller.testing.events import at, replay, running_run, terminated, worker
from tests.rules.corpus_replay import Entry, run
from tests.rules.corpus_replay import replayed as _outcome
from tests.rules.corpus_replay import root_cause_of as _cause
from tests.rules.corpus_replay import rules_fired as _rules

# ------------------------------------------------------------------ disk-full


@pytest.mark.parametrize(
    "message",
    [
        "Pod ephemeral local storage usage exceeds the total limit of containers 20Gi. ",
        'Container pytorch exceeded its local ephemeral storage limit "10Gi". ',
        'Usage of EmptyDir volume "ckpt-scratch" exceeds the limit "8Gi". ',
        "The node was low on resource: inodes. ",
        "The node was low on resource: ephemeral-storage. Container trainer was using 52Gi, which exceeds its "
        "request of 0. ",
    ],
    ids=["pod-total-limit", "container-limit", "emptydir-size-limit", "node-inodes", "node-older-wording"],
)
def test_the_kubelets_evictions_for_ephemeral_storage_are_a_full_disk(message: str) -> None:
    assert _rules(message, "disk-full", where="event", reason="Evicted") == {"disk-full"}


def test_the_sentence_names_what_exceeded_and_the_remedy_is_ephemeral_storages() -> None:
    text = 'Container pytorch exceeded its local ephemeral storage limit "10Gi". '
    outcome = _outcome(text, "disk-full", stack="other", where="event", reason="Evicted")
    finding = next(f for f in outcome.firing if f.rule == "disk-full")
    assert "container pytorch exceeded its ephemeral-storage limit (10Gi)" in finding.root_cause
    assert any("sizeLimit" in step and "PersistentVolumeClaim" in step for step in finding.remediation)


def test_a_pod_evicted_for_ephemeral_storage_is_told_once_as_a_full_disk() -> None:
    engine = RuleEngine()
    running = running_run()  # first: resource versions grow in the order the events are built
    evicted = worker(
        1,
        phase="Failed",
        ready=False,
        containers=(terminated("ContainerStatusUnknown", 137),),
        reason="Evicted",
        message="Pod ephemeral local storage usage exceeds the total limit of containers 40Gi. ",
        observed_at=at(1),
    )
    replay(engine, [*running, evicted], at(2))
    firing = {f.rule: f for f in engine.firing()}
    assert "disk-full" in firing and "evicted" not in firing
    assert firing["disk-full"].root_cause.startswith("The kubelet evicted Worker 1:")


def test_an_eviction_for_ephemeral_storage_in_a_run_that_succeeded_fires_nothing() -> None:
    text = 'Usage of EmptyDir volume "ckpt-scratch" exceeds the limit "8Gi". '
    entry = Entry(id="t", file="t", stack="other", where="event", reason="Evicted", expect=None, text=text)
    assert run(entry, succeed=True).rules == frozenset()


@pytest.mark.parametrize(
    "message",
    [
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 81200Ki. Container "
        "trainer was using 60Gi, request is 32Gi, has larger consumption of memory. ",
        "The node was low on resource: pids. ",
    ],
    ids=["memory", "pids"],
)
def test_an_eviction_for_another_resource_is_no_full_disk(message: str) -> None:
    assert "disk-full" not in _rules(message, None, where="event", reason="Evicted")


# ----------------------------------------------------------------- rendezvous


@pytest.mark.parametrize(
    "text",
    [
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network "
        "address. port: 29400, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
        "[E socket.cpp:957] [c10d] The server socket has failed to bind to 0.0.0.0:23456 (errno: 98 - Address "
        "already in use).",
        '  File "/opt/conda/lib/python3.7/site-packages/torch/distributed/rendezvous.py", line 158, in '
        "_create_c10d_store\n"
        "    return TCPStore(\n"
        "RuntimeError: Address already in use",
    ],
    ids=["newer-torch-eaddrinuse", "c10d-log-line", "older-torch-bare-runtime-error"],
)
def test_the_c10d_store_unable_to_bind_its_port_is_a_rendezvous(text: str) -> None:
    assert _rules(text, "rendezvous", stack="pytorch") == {"rendezvous"}


def test_the_sentence_of_a_store_that_could_not_bind_names_the_port() -> None:
    text = "[c10d] The server socket has failed to bind to [::]:29511 (errno: 98 - Address already in use)."
    cause = _cause(text, "rendezvous", stack="pytorch")
    assert "could not start the c10d store" in cause and "port 29511" in cause


def test_an_address_in_use_outside_the_store_is_no_rendezvous() -> None:
    text = (
        '  File "/usr/lib/python3.10/socketserver.py", line 466, in server_bind\n'
        "    self.socket.bind(self.server_address)\n"
        "OSError: [Errno 98] Address already in use"
    )
    assert "rendezvous" not in _rules(text, None, stack="pytorch")


@pytest.mark.parametrize(
    "text",
    [
        "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for workers. 3/4 workers "
        "joined.",
        "torch.distributed.DistStoreError: 7/8 clients joined.",
    ],
    ids=["workers-after-timeout", "bare-count"],
)
def test_the_store_counting_the_clients_that_joined_is_a_rendezvous(text: str) -> None:
    assert _rules(text, "rendezvous", stack="pytorch") == {"rendezvous"}


@pytest.mark.parametrize(
    "text",
    [
        "Summary of the elastic run:\n- 0 RendezvousTimeoutError\n- 3 successful restarts",
        "| error | count |\n| --- | --- |\n| RendezvousClosedError | 0 |",
        "RendezvousStateError: 0",
    ],
    ids=["bullet-count", "table-row", "name-then-count"],
)
def test_a_count_of_rendezvous_errors_is_no_rendezvous(text: str) -> None:
    assert _rules(text, None, stack="pytorch") == set()


# ------------------------------------------------------------------- mpi-comm


@pytest.mark.parametrize(
    "text",
    [
        "--------------------------------------------------------------------------\n"
        "A process or daemon was unable to complete a TCP connection\n"
        "to another process:\n"
        "  Local host:    trainer-worker-0\n"
        "  Remote host:   trainer-worker-3",
        "--------------------------------------------------------------------------\n"
        "At least one pair of MPI processes are unable to reach each other for\n"
        "MPI communications.  This means that no MPI device has indicated\n"
        "that it can be used to communicate between these processes.",
    ],
    ids=["tcp-connection-details", "bml-unreachable"],
)
def test_an_open_mpi_help_block_that_the_tail_cut_off_is_read_whole(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="openmpi") == {"mpi-comm"}


@pytest.mark.parametrize(
    "text",
    [
        "[node-3:00417] [prun.c:611] PMIx Error: PMIX_ERR_UNREACH",
        "[node-3:00417] pmix_client.c:412 PMIx_Fence failed: LOST_CONNECTION_TO_SERVER",
        "[node-3:00417] PRUN: EVHANDLER WITH STATUS LOST-CONNECTION(-101)",
    ],
    ids=["pmix-err-unreach", "pmix-lost-connection-to-server", "prun-lost-connection"],
)
def test_pmix_and_prrte_losing_their_server_are_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="openmpi") == {"mpi-comm"}


def test_pmix_unreachable_after_an_mpi_abort_is_the_aborts_cleanup() -> None:
    text = (
        "MPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\n"
        "with errorcode 3.\n"
        "[node-1:00999] [prun.c:611] PMIx Error: UNREACHABLE"
    )
    assert _rules(text, "mpi-abort", stack="openmpi") == {"mpi-abort"}


@pytest.mark.parametrize(
    "text",
    [
        "MPIDI_OFI_handle_cq_error(1062): OFI poll failed (ofi_events.c:1062:MPIDI_OFI_handle_cq_error:Input/"
        "output error)",
        "MPIR_Wait_impl(41)........: \n"
        "MPIDI_OFI_handle_cq_error(791): OFI poll failed (default nic=efa0-rdm: Transport endpoint is not "
        "connected)",
    ],
    ids=["older-format", "under-a-wait"],
)
def test_mpichs_ofi_netmod_polling_a_failed_completion_is_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm", stack="mpich") == {"mpi-comm"}
    assert "completion queue" in _cause(text, "mpi-comm", stack="mpich")


@pytest.mark.parametrize(
    "text",
    [
        "[12:00:01] src/./zmq_van.h:355: Check failed: (rc) == (0) connect to tcp://10.0.1.5:9091 failed: "
        "Connection refused",
        "[2023-03-01 10:00:00*F byteps/3rdparty/ps-lite/src/van.cc:517] Check failed: (my_node_.port) != (-1) "
        "bind failed",
    ],
    ids=["zmq-van-refused", "byteps-van-bind"],
)
def test_ps_lites_van_unable_to_connect_or_bind_is_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm") == {"mpi-comm"}
    assert "ps-lite" in _cause(text, "mpi-comm", stack="other")


def test_ray_train_re_raising_torchs_backend_error_is_a_communication_failure() -> None:
    text = (
        "ray.exceptions.RayTaskError(DistBackendError): ray::RayTrainWorker._RayTrainWorker__execute() "
        "(pid=812, ip=10.0.3.4, actor_id=0f0e, repr=<ray.train._internal.worker_group.RayTrainWorker "
        "object at 0x7f00>)"
    )
    assert _rules(text, "mpi-comm", stack="pytorch") == {"mpi-comm"}
    assert "Ray Train" in _cause(text, "mpi-comm", stack="pytorch")


def test_a_handler_of_backend_errors_is_no_communication_failure() -> None:
    text = "    except torch.distributed.DistBackendError:\n        log.info('collective failed, skipping')"
    assert _rules(text, None, stack="pytorch") == set()


# ------------------------------------------------------------------- segfault


@pytest.mark.parametrize(
    "text",
    [
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 811 RUNNING AT n02\n"
        "=   EXIT CODE: 139\n"
        "=   CLEANING UP REMAINING PROCESSES",
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 77 RUNNING AT gpu-node-4\n"
        "=   EXIT CODE: 11\n"
        "YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Segmentation fault (signal 11)",
    ],
    ids=["exit-code-139", "exit-string"],
)
def test_hydras_account_of_a_process_that_died_of_sigsegv_is_a_segfault(text: str) -> None:
    assert _rules(text, "segfault", stack="mpich") == {"segfault"}


@pytest.mark.parametrize("code", [134, 137])
def test_hydras_exit_code_of_another_signal_is_a_killed_rank_not_a_segfault(code: int) -> None:
    text = (
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 811 RUNNING AT n02\n"
        f"=   EXIT CODE: {code}\n"
        "=   CLEANING UP REMAINING PROCESSES"
    )
    assert _rules(text, "mpi-abort", stack="mpich") == {"mpi-abort"}
    assert f"killed by signal {code - 128}" in _cause(text, "mpi-abort", stack="mpich")


def test_a_communication_failure_before_hydras_exit_code_is_named_first() -> None:
    text = (
        "[proxy:0@n01] HYDU_sock_write (lib/utils/sock.c:250): write error (Connection reset by peer)\n"
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 811 RUNNING AT n01\n"
        "=   EXIT CODE: 139"
    )
    assert _rules(text, "mpi-comm", stack="mpich") == {"mpi-comm"}


# ------------------------------------------------------------------ mpi-abort


@pytest.mark.parametrize(
    ("text", "when"),
    [
        (
            "*** The MPI_Send() function was called after MPI_FINALIZE was invoked.\n"
            "*** This is disallowed by the MPI standard.\n"
            "*** Your MPI job will now abort.\n"
            "[node3:12345] Local abort after MPI_FINALIZE started completed successfully, but am not able to "
            "aggregate error messages, and not able to guarantee that all other processes were killed!",
            "MPI_Send was called after MPI_Finalize",
        ),
        (
            "*** An error occurred in MPI_Comm_size\n"
            "*** on a NULL communicator\n"
            "*** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n"
            "***    and potentially your MPI job)",
            "MPI_Comm_size was called before MPI_Init",
        ),
    ],
    ids=["after-finalize", "null-communicator"],
)
def test_open_mpis_local_abort_of_a_call_outside_init_and_finalize_is_an_abort(text: str, when: str) -> None:
    assert _rules(text, "mpi-abort", stack="openmpi") == {"mpi-abort"}
    assert when in _cause(text, "mpi-abort", stack="openmpi")
