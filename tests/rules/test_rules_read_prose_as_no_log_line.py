"""Prose about an error is no log line; the families the blind set of 2026-11-28d showed missing.

Every text here is written for the test, in other words than the blind set's: documentation, an
answer, a code table or a page of examples that *names* each rule's failure words must fire
nothing (:func:`consumers.rules.tails.prose`, in the reader every rule starts from), while the same
words printed by a program still fire. Then the formats learnt by family: Horovod's launcher
repeating mpirun's non-zero exit with a bare rank, Horovod's shutdown after a rank's exit (the
rank's ``mpi-abort``, not ``mpi-comm``), MPD's collective abort as it starts a line, the kubelet's
``CgroupOOM`` Event about the pod, TensorFlow's ``ResourceExhaustedError`` naming a file (a full
disk; naming memory, a GPU out of memory), and an error a run went on past to print its results.
"""

from __future__ import annotations

import pytest

from consumers.rules.tails import bounded, prose
from controller.contract.findings import RuleId
from tests.rules.corpus_replay import fires_alone, replayed, stays_quiet

# (text, the stack whose replay carries it), one or more per rule that reads texts
PROSE = {
    "oom-answer": (
        "Our nodes print Out of memory: Killed process 4321 (java) every night while the backup runs.",
        "other",
    ),
    "oom-explained": (
        "Memory cgroup out of memory: Kill process is what the kernel says when a container reaches its "
        "limit; it means the pod needs a higher limit.",
        "other",
    ),
    "gpu-oom-list-item": (
        "- `CUDA out of memory`: the batch does not fit the card; lower it first.",
        "other",
    ),
    "gpu-error-code-table": (
        "Xid codes worth knowing:\n"
        "* Xid 48 — double-bit ECC error, the card must be drained\n"
        "* Xid 74 — NVLink error between two GPUs\n"
        "* Xid 79 — GPU has fallen off the bus",
        "cuda",
    ),
    "gpu-error-advice": (
        "If your job shows an illegal memory access was encountered, you most likely indexed past a tensor.",
        "other",
    ),
    "segfault-definition": (
        "A program that prints Segmentation fault (core dumped) means it touched memory it does not own, "
        "e.g. a null pointer.",
        "other",
    ),
    "disk-full-examples": (
        "Typical messages look like this:\n"
        "tar: write error: No space left on device\n"
        "OSError: [Errno 28] No space left on device: '/ckpt/step-100.pt'",
        "other",
    ),
    "disk-full-errno-as-topic": (
        "Note that ENOSPC is also returned when the inodes run out, even with blocks free.",
        "other",
    ),
    "quota-comment": ("We hit exceeded quota: team-quota when the job scaled out, so we raised it.", "other"),
    "rendezvous-answer": (
        "You'll get RendezvousTimeoutError if one node joins after the others gave up waiting.",
        "pytorch",
    ),
    "mpi-comm-heading-and-words": (
        "I get Gloo connectFullMesh failed whenever the pods start before their Service exists.",
        "gloo",
    ),
    "mpi-comm-reported": (
        "Observed NCCL socket timeouts (ETIMEDOUT) on the second slice, e.g. after a preemption.",
        "pytorch",
    ),
    "mpi-abort-explained": (
        "You will see MPI_ABORT was invoked on rank 0 whenever any rank raises an exception.",
        "openmpi",
    ),
}


@pytest.mark.parametrize("case", PROSE.values(), ids=PROSE.keys())
def test_prose_that_names_a_failure_fires_nothing(case: tuple[str, str]) -> None:
    text, stack = case
    stays_quiet(text, stack=stack)


# the same words, printed by a program
PRINTED = {
    "oom": ("[ 8812.31] Out of memory: Killed process 4321 (python) total-vm:9000kB", "oom"),
    "disk-full": ("OSError: [Errno 28] No space left on device: '/ckpt/step-100.pt'", "disk-full"),
    "segfault": ("Segmentation fault (core dumped)", "segfault"),
    "gpu-error": (
        "[ 501.2] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.",
        "gpu-error",
    ),
}


@pytest.mark.parametrize("case", PRINTED.values(), ids=PRINTED.keys())
def test_the_same_words_printed_by_a_program_still_fire(case: tuple[str, RuleId]) -> None:
    text, rule = case
    fires_alone(text, rule)


def test_a_programs_help_text_or_a_ranks_tagged_line_is_no_prose_however_it_reads() -> None:
    tail = (
        "--------------------------------------------------------------------------",
        "You may or may not see output from other processes, depending on",
        "exactly when Open MPI kills them.",
        "--------------------------------------------------------------------------",
        "[1,2]<stderr>:Horovod has been shut down. If the shutdown was caused by an exception, you should see it.",
        "This usually means the fabric is down: see the FAQ.",
    )

    assert prose(tail) == frozenset({5})
    assert bounded(tail)[5] == "" and bounded(tail)[4] == tail[4]


def test_the_examples_a_sentence_introduces_end_at_the_blank_line() -> None:
    text = (
        "For example, the kernel may print lines such as:\n"
        "Out of memory: Killed process 10 (a)\n"
        "\n"
        "[ 9001.0] Memory cgroup out of memory: Killed process 77 (python) total-vm:1kB"
    )

    finding = fires_alone(text, "oom")

    assert "python" in finding.root_cause


# ----------------------------------------------------------------- families


def test_horovods_launcher_repeating_a_non_zero_exit_with_a_bare_rank_is_that_ranks_abort() -> None:
    text = (
        "RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing "
        "the job to be terminated. The first process to do so was:\n"
        "Process name: 3\n"
        "Exit code: 2"
    )

    finding = fires_alone(text, "mpi-abort", stack="horovod")

    assert finding.root_cause.startswith("Rank 3") and "code 2" in finding.root_cause


def test_horovods_shutdown_after_a_ranks_exit_is_that_ranks_abort_not_the_mesh() -> None:
    text = (
        "[1,1]<stderr>:tensorflow.python.framework.errors_impl.AbortedError: Horovod has been shut down. This "
        "was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a "
        "tensor after one of the ranks finished execution.\n"
        "--------------------------------------------------------------------------\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n"
        "\n"
        "  Process name: [[4100,1],2]\n"
        "  Exit code:    1\n"
        "--------------------------------------------------------------------------"
    )

    finding = fires_alone(text, "mpi-abort", stack="horovod")

    assert finding.root_cause.startswith("Rank 2")


def test_horovods_shutdown_with_no_rank_reported_stays_a_communication_failure() -> None:
    text = (
        "[1,0]<stderr>:Horovod has been shut down. This was caused by an exception on one of the ranks or an "
        "attempt to allreduce a tensor after one of the ranks finished execution."
    )

    fires_alone(text, "mpi-comm", stack="horovod")


def test_mpds_collective_abort_as_it_starts_a_line_names_the_rank_and_its_status() -> None:
    text = (
        "Rank 3 in job 7  node-a.cluster_40123   caused collective abort of all ranks\n"
        "  Exit status of rank 3: return code 1"
    )

    finding = fires_alone(text, "mpi-abort", stack="mpich")

    assert finding.root_cause.startswith("Rank 3") and "code 1" in finding.root_cause


def test_the_kubelets_cgroup_oom_event_about_the_pod_is_an_oom_kill_naming_the_victim() -> None:
    finding = fires_alone(
        "Cgroup OOM encountered, victim process: python3, pid: 9001", "oom", where="event", reason="CgroupOOM"
    )

    assert "python3" in finding.root_cause


def test_a_cgroup_oom_event_in_a_run_that_succeeded_fires_nothing() -> None:
    text = "Cgroup OOM encountered, victim process: sh, pid: 12"

    assert replayed(text, None, stack="other", where="event", reason="CgroupOOM", succeed=True).rules == set()


@pytest.mark.parametrize(
    "text",
    [
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: gs://bucket/run/model.ckpt-200"
        ".data-00000-of-00001.tempstate123",
        "ResourceExhaustedError: ../out/model.ckpt-7.index.tempstate99",
        "RESOURCE_EXHAUSTED: C:\\runs\\ckpt\\model.ckpt-3.tempstate1",
    ],
)
def test_tensorflows_resource_exhausted_naming_a_file_in_any_form_is_a_full_disk(text: str) -> None:
    fires_alone(text, "disk-full", stack="tensorflow")


def test_tensorflows_resource_exhausted_naming_memory_stays_a_gpu_oom() -> None:
    fires_alone(
        "ResourceExhaustedError: OOM when allocating tensor with shape[4096,4096]",
        "gpu-oom",
        stack="tensorflow",
    )


def test_a_transport_error_the_run_went_on_past_to_its_results_fires_nothing() -> None:
    text = (
        "[1700000000.1] [node-1:100:0]   ib_md.c:300  UCX  ERROR mlx5_1: ibv_reg_mr() failed: Cannot allocate "
        "memory\n"
        "# Size      Bandwidth (MB/s)\n"
        "8                    12.51\n"
        "16                   25.03"
    )

    stays_quiet(text, stack="ucx")


def test_a_transport_error_followed_by_its_consequence_still_fires() -> None:
    text = (
        "[1700000000.1] [node-1:100:0]   ib_md.c:300  UCX  ERROR mlx5_1: ibv_reg_mr() failed: Cannot allocate "
        "memory\n"
        "[node-1:100] pml_ucx.c:309  Error: Failed to create UCP worker"
    )

    fires_alone(text, "mpi-comm", stack="ucx")
