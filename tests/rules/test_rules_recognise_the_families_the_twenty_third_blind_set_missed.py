"""The families the blind set of 2026-11-30o showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: HPC launchers'
and runtimes' own reports of a rank they ended — srun's task ended by a signal of its own code, OpenFOAM's
signal handler and fatal error, GNU Fortran's runtime, Cray ALPS's PE ranks and aprun's exit codes, Fujitsu
MPI's plexec (``mpi-abort``); mpirun's account of a rank dead of signal 11 whatever words follow it and
OpenFOAM's SIGSEGV handler (``segfault``); SQLite's ``database or disk is full`` as each binding raises it
(``disk-full``); glog's CHECK of a CUDA call that returned ``cudaErrorMemoryAllocation`` (``gpu-oom``); the
OOM killer's event listed without its reason, ``kubectl get pods``' ``OOMKilled`` column and a person's
report quoting Ray's error (``oom``); Horovod's stall inspector's list of missing ranks and a queue pair that
NVSHMEM's InfiniBand transport could not connect (``mpi-comm``); the c10d store's timeout with its count cut
off (``rendezvous``). Each near-miss names a family's words without reporting its failure: a reference
table's row naming an error and its meaning, a change's before and after of a message, source code mapping
signal numbers to their names.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_MPI_ABORT: dict[str, Wording] = {
    # srun naming the signal that ended a range of tasks as strsignal() words it (Slurm's srun task exit)
    "srun-tasks-floating-point-exception-core-dumped": (
        "srun: error: node17: tasks 0-3: Floating point exception (core dumped)\n"
        "srun: Terminating StepId=88123.0",
        "killed by signal 8 (SIGFPE)",
        "",
        "other",
    ),
    # the same for a task that ran an instruction the CPU does not have (a binary built for another CPU)
    "srun-task-illegal-instruction": (
        "srun: error: nid00012: task 3: Illegal instruction",
        "killed by signal 4 (SIGILL)",
        "",
        "other",
    ),
    # OpenFOAM's SIGFPE handler on one processor of a parallel run, its frames tagged by processor
    # (src/OSspecific/POSIX/signals/sigFpe.C: error::printStack, then the signal raised again)
    "openfoam-sigfpe-handler-processor-3": (
        "[3] #0  Foam::error::printStack(Foam::Ostream&) at ??:?\n"
        "[3] #1  Foam::sigFpe::sigHandler(int) at ??:?\n"
        "[3] #2  ? in /lib64/libc.so.6",
        "sigFpe handler trapped a floating-point exception",
        "Courant number",
        "openmpi",
    ),
    # OpenFOAM's fatal error in a parallel run, its message tagged by processor (src/OpenFOAM/db/error/error.C)
    "openfoam-fatal-error-parallel-run-aborting": (
        "[2] \n[2] --> FOAM FATAL ERROR: \n[2] Maximum number of iterations exceeded: 1000\n[2] \n"
        "[2]     From function Foam::label Foam::face::split()\n[2] \n[2] FOAM parallel run aborting\n[2] ",
        "FOAM FATAL ERROR aborted it: Maximum number of iterations exceeded",
        "numberOfSubdomains",
        "openmpi",
    ),
    # libgfortran's backtrace handler on a signal of the program's own code
    "gfortran-program-received-sigfpe": (
        "Program received signal SIGFPE: Floating-point exception - erroneous arithmetic operation.\n\n"
        "Backtrace for this error:\n#0  0x7f3c2a1b in ???",
        "GNU Fortran's runtime caught SIGFPE",
        "-ffpe-trap",
        "other",
    ),
    # Cray ALPS's PMI daemon on a PE that aborted, then aprun's summary of the codes (128 + 6)
    "alps-pe-rank-exit-signal-aborted": (
        "_pmiu_daemon(SIGCHLD): [NID 00012] [c0-0c0s3n0] [Mon Jan 11 10:00:00 2021] PE RANK 5 exit signal "
        "Aborted\nApplication 4412345 exit codes: 134",
        "Rank 5 on nid00012 was killed by signal 6 (SIGABRT)",
        "ATP_ENABLED",
        "other",
    ),
    # aprun's summary alone, a floating-point exception's 128 + 8
    "aprun-application-exit-codes-136": (
        "Application 4412345 exit codes: 136\nApplication 4412345 resources: utime ~0s, stime ~1s",
        "exited with code 136",
        "aprun",
        "other",
    ),
    # Fujitsu MPI's plexec at its error level on another rank and node
    "fujitsu-plexec-err-rank-12": (
        "[ERR.] PLE 0608 plexec One of MPI processes was aborted.(rank=12)(nid=0x03010006)"
        "(CODE=1938,793745140674134016,1536)",
        "Rank 12",
        "pjsub",
        "other",
    ),
}

_SEGFAULT: dict[str, Wording] = {
    # mpirun's account with macOS's signal name after the number
    "mpirun-noticed-signal-11-segmentation-fault-11": (
        "mpirun noticed that process rank 0 with PID 0 on node n3 exited on signal 11 (Segmentation fault: 11).",
        "Rank 0 on n3 crashed with a segmentation fault",
        "PYTHONFAULTHANDLER",
        "openmpi",
    ),
    # OpenFOAM's SIGSEGV handler (src/OSspecific/POSIX/signals/sigSegv.C)
    "openfoam-sigsegv-handler": (
        "#0  Foam::error::printStack(Foam::Ostream&) at ??:?\n#1  Foam::sigSegv::sigHandler(int) at ??:?\n"
        "#2  ? in /lib64/libc.so.6",
        "in an OpenFOAM solver",
        "checkMesh",
        "other",
    ),
}

_DISK_FULL: dict[str, Wording] = {
    # Go's database/sql driver's error in a logfmt line (mattn/go-sqlite3 gives sqlite3_errstr's words)
    "go-sqlite3-logfmt-database-or-disk-is-full": (
        'time="2024-02-01T10:00:00Z" level=error msg="could not record the run" error="database or disk is full"',
        "SQLite database could not grow",
        "max_page_count",
        "other",
    ),
    # Node's better-sqlite3 raising it as its SqliteError
    "better-sqlite3-sqliteerror": (
        "SqliteError: database or disk is full\n"
        "    at Database.exec (/app/node_modules/better-sqlite3/lib/methods/wrappers.js:9:14)",
        "SQLite database could not grow",
        "PersistentVolumeClaim",
        "other",
    ),
}

_GPU_OOM: dict[str, Wording] = {
    # Caffe's SyncedMemory allocating a blob (its CUDA_CHECK in syncedmem.cpp)
    "caffe-syncedmem-check-failed-cudasuccess-2": (
        "F0312 09:01:02.123456 12345 syncedmem.cpp:56] Check failed: error == cudaSuccess (2 vs. 0)  out of "
        "memory\n*** Check failure stack trace: ***",
        "Caffe's CUDA_CHECK",
        "batch_size",
        "other",
    ),
}

_OOM: dict[str, Wording] = {
    # kubectl get pods with the pod/ prefix and a newer RESTARTS column, printed by a job's script
    "kubectl-get-pods-prefixed-restarts-ago": (
        "$ kubectl get pods\nNAME            READY   STATUS      RESTARTS      AGE\n"
        "pod/trainer-0   0/1     OOMKilled   1 (12s ago)   40s",
        "out of memory",
        "resources.limits.memory",
        "kubernetes",
    ),
}

_MPI_COMM: dict[str, Wording] = {
    # Horovod's stall inspector under mpirun's tags, its list of missing ranks and their tensors
    "horovod-stall-missing-ranks-under-mpirun-tags": (
        "[1,0]<stderr>:Missing ranks:\n[1,0]<stderr>:2: [DistributedAdamOptimizer_Allreduce/"
        "HorovodAllreduce_gradients_0]",
        "Horovod's stall inspector",
        "HOROVOD_LOG_LEVEL",
        "horovod",
    ),
    # NVSHMEM's IBGDA transport with its message on the same line as its error macro's
    "nvshmem-ibgda-non-zero-status-ibv-modify-qp": (
        "/opt/nvshmem/src/modules/transport/ibgda/ibgda.cpp:2011: non-zero status: 7 ibv_modify_qp failed",
        "NVSHMEM could not connect its endpoints",
        "NVSHMEM_DEBUG",
        "other",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # the store's timeout raised as torch's DistStoreError, its count of workers cut off
    "diststoreerror-timed-out-waiting-for-workers": (
        "torch.distributed.DistStoreError: Timed out after 300 seconds waiting for workers",
        "waited 300s for the others at its c10d store",
        "MASTER_ADDR",
        "pytorch",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "mpi-abort": _MPI_ABORT,
            "segfault": _SEGFAULT,
            "disk-full": _DISK_FULL,
            "gpu-oom": _GPU_OOM,
            "oom": _OOM,
            "mpi-comm": _MPI_COMM,
            "rendezvous": _RENDEZVOUS,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# the OOM killer's events listed with their reason as a column, their involved object between (the watcher's
# event without a reason)
_LISTED_EVENTS: dict[str, tuple[str, str]] = {
    "kubelet-system-oom-listed": (
        "Warning  SystemOOM  node/gke-pool-1-abc  System OOM encountered, victim process: python, pid: 4242",
        "killed python",
    ),
    "npd-oomkilling-listed-killed-process": (
        "5m  Warning  OOMKilling  node/gke-pool-1-abc  Memory cgroup out of memory: Killed process 8812 "
        "(python3) total-vm:9123456kB",
        "killed python3",
    ),
}


@pytest.mark.parametrize(("text", "said"), list(_LISTED_EVENTS.values()), ids=list(_LISTED_EVENTS))
def test_the_oom_killers_event_listed_without_its_reason_is_its_own(text: str, said: str) -> None:
    fires_saying(text, "oom", said, "resources.limits.memory", stack="kubernetes", where="event")


def test_a_person_quoting_rays_error_between_the_word_and_its_verb_reports_it() -> None:
    text = (
        'When training on 4 nodes, the error "ray.exceptions.OutOfMemoryError: Task was killed due to the '
        'node running low on memory." occurred.'
    )
    fires_saying(text, "oom", "Ray's memory monitor", "", stack="other")


# a family's words named, not reported: a reference table's rows, a change's before and after, a map of signal
# names in source code, the generic account of when an error comes
_QUIET: dict[str, tuple[str, str]] = {
    # a reference table's row in markdown, torch elastic's error class and what it means
    "table-row-rendezvous-timeout-error-meaning": (
        "| `RendezvousTimeoutError` | Raised when the rendezvous did not complete within its timeout. |",
        "pytorch",
    ),
    # a table of SQLite's result codes, the code's number and words in its cells
    "table-row-sqlite-full-result-code": ("| SQLITE_FULL | 13 | database or disk is full |", "other"),
    # a table of signals without its closing pipe
    "table-row-sigsegv-meaning-unclosed": (
        "SIGSEGV | Invalid memory reference, the process is killed and may dump core",
        "other",
    ),
    # a table of pod statuses
    "table-row-oomkilled-meaning": (
        "OOMKilled | The container used more memory than its limit and the kernel killed it",
        "kubernetes",
    ),
    # a pull request's account of a message before and after its change
    "pr-failure-record-would-show-will-show-sigbus": (
        "Before this change the failure record would show:\n```\nexitcode  : -7 (pid: 88)\n```\n\n"
        "With it, it will show:\n```\nexitcode  : -7 (pid: 88) (SIGBUS)\n```",
        "pytorch",
    ),
    # source code mapping signal numbers to their names
    "source-signal-number-to-name-map": (
        '_SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 11: "SIGSEGV"}',
        "other",
    ),
    # the generic account of when an error comes, quoted between the word and its verb
    "error-quoted-happens-when-disk-full": (
        'The error "No space left on device" happens when the disk is full.',
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
