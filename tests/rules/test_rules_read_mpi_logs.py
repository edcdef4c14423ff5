"""The log readers recognise each MPI implementation's wording and name the host or rank."""

from __future__ import annotations

import pytest

from consumers.rules.tails import comm_failures, gpu_oom_lines, rank_failures


def _tail(text: str) -> tuple[str, ...]:
    return tuple(text.strip("\n").splitlines())


COMM = {
    "openssh-refused": (
        "ssh: connect to host pi-worker-1.pi.team-a.svc port 22: Connection refused",
        "refused",
        "pi-worker-1.pi.team-a.svc",
    ),
    "openssh-timed-out": (
        "ssh: connect to host 10.4.2.17 port 22: Connection timed out",
        "timed-out",
        "10.4.2.17",
    ),
    "openssh-no-route": (
        "ssh: connect to host pi-worker-2 port 22: No route to host",
        "no-route",
        "pi-worker-2",
    ),
    "openssh-unresolved": (
        "ssh: Could not resolve hostname pi-worker-3.pi: Name or service not known",
        "unresolved",
        "pi-worker-3.pi",
    ),
    "openssh-publickey": ("root@pi-worker-0: Permission denied (publickey).", "publickey", "pi-worker-0"),
    "openssh-publickey-bare": ("Permission denied (publickey).", "publickey", None),
    "orte-unable-to-start": ("ORTE was unable to reliably start one or more daemons.", "daemon-start", None),
    "prte-unable-to-start": ("PRTE was unable to reliably start one or more daemons.", "daemon-start", None),
    "orte-lost-daemon": (
        "ORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[43262,0],0] on node pi-launcher\n"
        "  Remote daemon: [[43262,0],2] on node pi-worker-1",
        "daemon-lost",
        "pi-worker-1",
    ),
    "hydra-connect": (
        '[mpiexec@pi-launcher] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from "pi-launcher" '
        'to "pi-worker-3" (Connection refused)',
        "hydra",
        "pi-worker-3",
    ),
    "intel-hydra-host-address": (
        "[mpiexec@pi-launcher] HYDU_sock_connect (../../../../../src/pm/i_hydra/libhydra/sock/hydra_sock_intel.c:218): "
        "unable to get host address for pi-worker-1.pi.team-a.svc (1)",
        "hydra",
        "pi-worker-1.pi.team-a.svc",
    ),
    "hydra-bad-termination-without-rank": (
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   PID 4242 RUNNING AT pi-worker-2\n=   EXIT CODE: 1",
        "bad-termination",
        "pi-worker-2",
    ),
    "openssh-host-key": ("Host key verification failed.", "host-key", None),
    "mpich-nemesis-frame-alone": (
        "MPID_nem_tcp_connpoll(1845): Communication error with rank 1: Connection refused",
        "mpi-error",
        None,
    ),
    "mpich-error-stack-of-another-class-naming-a-socket": (
        "Fatal error in PMPI_Barrier: Message truncated, error stack:\n"
        "MPIR_Barrier_impl(291).: Failure during collective\n"
        "MPIDI_CH3I_Progress(180): read from socket failed",
        "mpi-error",
        None,
    ),
}


def test_an_error_stack_of_a_program_error_is_not_a_communication_failure() -> None:
    log = "Fatal error in PMPI_Bcast: Invalid root, error stack:\nPMPI_Bcast(1478): MPI_Bcast(root=9) failed"

    assert comm_failures(_tail(log)) == ()


@pytest.mark.parametrize(("log", "kind", "host"), COMM.values(), ids=COMM.keys())
def test_communication_failure_and_its_host(log: str, kind: str, host: str | None) -> None:
    (failure,) = comm_failures(_tail(log))

    assert (failure.kind, failure.host) == (kind, host)
    assert failure.lines[0] in log


RANKS = {
    "ompi4-abort": (
        "MPI_ABORT was invoked on rank 5 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n\n"
        "mpirun has exited due to process rank 5 with PID 1234 on\nnode pi-worker-1 exiting improperly.",
        (5, "aborted", 1, None, "pi-worker-1"),
    ),
    "ompi5-abort": (
        "MPI_ABORT was invoked on rank 7 in communicator MPI_COMM_WORLD\n  Proc: [[29394,1],7]\n  Errorcode: 42",
        (7, "aborted", 42, None, None),
    ),
    "ompi-signal": (
        "prterun noticed that process rank 2 with PID 0 on node pi-worker-0 exited on signal 9 (Killed).",
        (2, "killed", None, "9 (Killed)", "pi-worker-0"),
    ),
    "ompi-nonzero-exit": (
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n\n  Process name: [[40125,1],17]\n  Exit code:    3",
        (17, "exited", 3, None, None),
    ),
    "mpich-abort": (
        "Abort(2) on node 4 (rank 4 in comm 0): application called MPI_Abort(MPI_COMM_WORLD, 2) - process 4",
        (4, "aborted", 2, None, None),
    ),
    "hydra-killed-rank": (
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 6 PID 99 RUNNING AT pi-worker-1\n"
        "=   KILLED BY SIGNAL: 11 (Segmentation fault)",
        (6, "killed", None, "11 (Segmentation fault)", "pi-worker-1"),
    ),
}


@pytest.mark.parametrize(("log", "expected"), RANKS.values(), ids=RANKS.keys())
def test_failed_rank_with_code_signal_and_host(log: str, expected: tuple[object, ...]) -> None:
    first = rank_failures(_tail(log))[0]

    assert (first.rank, first.how, first.code, first.signal, first.host) == expected


def test_hydra_block_naming_a_rank_is_a_rank_failure_not_lost_communication() -> None:
    log = _tail(
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   RANK 6 PID 99 RUNNING AT pi-worker-1\n=   EXIT CODE: 9"
    )

    assert comm_failures(log) == ()
    assert [f.rank for f in rank_failures(log)] == [6]


def test_abort_reported_before_the_kills_it_caused() -> None:
    log = _tail(
        "mpirun noticed that process rank 0 with PID 0 on node pi-worker-0 exited on signal 15 (Terminated).\n"
        "MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD\nwith errorcode 4."
    )

    assert [(f.rank, f.how) for f in rank_failures(log)] == [(3, "aborted"), (0, "killed")]


GPU = {
    "torch": ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", None),
    "torch-cuda-legacy": ("torch.cuda.OutOfMemoryError: CUDA out of memory.", None),
    "cublas": (
        "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
        None,
    ),
    "ompi-tagged": ("[1,5]<stderr>:RuntimeError: CUDA out of memory.", 5),
    "torchrun-tagged": ("[rank3]: torch.OutOfMemoryError: CUDA out of memory.", 3),
    "mpich-prepended": ("[12] torch.OutOfMemoryError: CUDA out of memory.", 12),
    "xla": (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
        None,
    ),
}


@pytest.mark.parametrize(("line", "rank"), GPU.values(), ids=GPU.keys())
def test_gpu_out_of_memory_and_its_rank(line: str, rank: int | None) -> None:
    ((hit),) = gpu_oom_lines(("step 10", line))

    assert (hit.line, hit.rank) == (line, rank)


def test_host_memory_errors_are_not_gpu_out_of_memory() -> None:
    assert gpu_oom_lines(("MemoryError", "Killed", "std::bad_alloc")) == ()
