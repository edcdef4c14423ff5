"""The families the blind set of 2026-11-29c showed missing, in other wordings than its own.

Each failure is a wording of its family from another thread: the API server's quota refusal quoted
in a program's output (a Spark driver's fabric8 client, in its two refusals), read like any printed
line — pending while the run goes on, nothing once it succeeds; Slurm's ``srun`` failing to reach a
node's slurmd (a new library of the mesh); the kernel's OOM killer's bare ``Killed process … total-vm:``
line in two kernels' formats and Talos's userspace OOM controller; XLA's TPU compiler running out of
HBM or VMEM; torch elastic's agent reporting a worker dead of signal 11; LAMMPS's Python module
raising the error it would abort with. Each near-miss is the same words where nothing failed (a
handler of the LAMMPS exception, a grep for the quota's words, a worker that died of SIGABRT).
"""

from __future__ import annotations

import pytest

from tests.rules.corpus_replay import Entry, run_live
from tests.rules.corpus_replay import root_cause_of as _cause
from tests.rules.corpus_replay import rules_fired as _rules

# ------------------------------------------------------------------ quota, printed

# kubeflow/spark-operator#810 (the driver's log), apache/airflow#70513 (spark-submit's), each from ``Message:``
SPARK_MUST_SPECIFY = (
    "Message: Forbidden!Configured service account doesn't have access. Service account may have been revoked. "
    'pods "pyspark-pi-1581596092621-exec-1" is forbidden: failed quota: system-resourcequota: must specify '
    "limits.cpu."
)
SPARK_EXCEEDED = (
    'Message: pods "arrow-spark-5808b09fa309515b-driver" is forbidden: exceeded quota: spark-demo-quota, '
    "requested: count/pods=1, used: count/pods=3, limited: count/pods=3. Received status: Status(apiVersion=v1, "
    "code=403, details=StatusDetails(causes=[], group=null, kind=pods, name=arrow-spark-5808b09fa309515b-driver, "
    "retryAfterSeconds=null, uid=null, additionalProperties={}), kind=Status)"
)


@pytest.mark.parametrize("text", [SPARK_MUST_SPECIFY, SPARK_EXCEEDED], ids=["failed-quota", "exceeded-quota"])
def test_a_quota_refusal_a_program_printed_is_the_runs_quota_once_it_failed(text: str) -> None:
    assert _rules(text, "quota") == {"quota"}


def test_the_sentence_names_the_object_refused_the_quota_and_who_printed_it() -> None:
    cause = _cause(SPARK_EXCEEDED, "quota", stack="other")

    assert "pod arrow-spark-5808b09fa309515b-driver" in cause
    assert "ResourceQuota spark-demo-quota is exhausted for count/pods" in cause
    assert "Worker 0 printed the refusal" in cause


def _printed(text: str) -> Entry:
    return Entry(id="t", file="t", stack="other", where="log", expect="quota", text=text)


def test_a_printed_quota_refusal_seen_live_is_pending_not_firing() -> None:
    live = run_live(_printed(SPARK_MUST_SPECIFY), end=False)

    assert [(f.rule, f.status) for f in live.firing if f.rule == "quota"] == [("quota", "pending")]


def test_a_printed_quota_refusal_in_a_run_that_succeeds_delivers_nothing() -> None:
    outcome = run_live(_printed(SPARK_EXCEEDED), succeed=True)

    assert outcome.firing == ()
    assert [f.rule for f in outcome.changes if f.status == "firing"] == []


def test_words_of_a_quota_refusal_without_the_api_servers_refusal_are_no_quota() -> None:
    # a check script's grep, and a ``describe quota`` heading (kubernetes/website, "Resource Quotas")
    text = "kubectl get events -n team-a | grep 'exceeded quota' || echo 'no quota refusals'"
    assert "quota" not in _rules(text, None)


# ------------------------------------------------------------------ Slurm's srun


@pytest.mark.parametrize(
    "text",
    [
        # mlr-org/batchtools#201
        "srun: error: Task launch for StepId=34.0 failed on node ubuntu4: Socket timed out on send/recv operation",
        # aws/aws-parallelcluster#1122
        "srun: error: fwd_tree_thread: can't find address for host ip-172-31-94-221, check slurm.conf\n"
        "srun: error: Application launch failed: Can't find an address, check slurm.conf",
        # fractal-analytics-platform/fractal-server#1459
        "srun: error: slurm_receive_msg: Transport endpoint is not connected",
    ],
    ids=["task-launch-timed-out", "no-address-for-host", "transport-endpoint"],
)
def test_srun_failing_to_reach_a_nodes_slurmd_is_a_communication_failure(text: str) -> None:
    assert _rules(text, "mpi-comm") == {"mpi-comm"}


def test_the_sentence_and_steps_are_slurms() -> None:
    text = "srun: error: Task launch for StepId=34.0 failed on node ubuntu4: Socket timed out on send/recv operation"
    assert "srun's messages to a node's slurmd timed out" in _cause(text, "mpi-comm", stack="other")


def test_srun_saying_the_step_was_aborted_is_no_communication_failure() -> None:
    # aws/aws-parallelcluster#1122: the cleanup line, alone
    text = "srun: Job step aborted: Waiting up to 32 seconds for job step to finish."
    assert "mpi-comm" not in _rules(text, None)


# ------------------------------------------------------------------ the OOM killer, bare


@pytest.mark.parametrize(
    "text",
    [
        # Athou/commafeed#792
        "Apr 15 20:56:15 wordpress-nyc kernel: [ 3454.698319] Killed process 1312 (java) total-vm:2133696kB, "
        "anon-rss:256140kB, file-rss:0kB",
        # cPanelSSP/SSP#76 (RHEL 6's order: the UID before the name)
        "Mar  2 17:35:10 server1 kernel: [2858609.598568] Killed process 11726, UID 498, (mysqld) "
        "total-vm:7823732kB, anon-rss:2539268kB, file-rss:768kB",
        # siderolabs/talos#13622
        "[talos] OOM controller triggered",
    ],
    ids=["killed-process-total-vm", "killed-process-uid-first", "talos-oom-controller"],
)
def test_the_oom_killers_line_on_its_victim_is_an_oom_kill(text: str) -> None:
    assert _rules(text, "oom") == {"oom"}


def test_the_sentence_names_the_victim_of_the_bare_kill() -> None:
    text = (
        "Apr 15 20:56:15 wordpress-nyc kernel: [ 3454.698319] Killed process 1312 (java) total-vm:2133696kB, "
        "anon-rss:256140kB, file-rss:0kB"
    )
    assert "the kernel killed java" in _cause(text, "oom", stack="other")


def test_a_process_that_says_killed_without_the_kernels_account_is_no_oom_kill() -> None:
    # Athou/commafeed#792: what the shell printed
    assert "oom" not in _rules("Killed", None)


# ------------------------------------------------------------------ TPU memory


@pytest.mark.parametrize(
    "text",
    [
        # tensorflow/tpu#598
        "W1110 07:24:24.387306     892 op_kernel.cc:1639] Resource exhausted: Compilation failure: Ran out of "
        "memory in memory space hbm. Used 18.56G of 16.00G hbm. Exceeded hbm capacity by 2.56G.",
        # pytorch/xla#9524
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
        "memory in memory space vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by 16.42M",
        # jax-ml/jax#7822
        "Compilation failure: Aborting compilation early because it's unlikely to have enough memory. Requires "
        "3.47E, has 14.49G available.",
    ],
    ids=["hbm-tf", "vmem-torch-xla", "aborting-early"],
)
def test_xla_running_out_of_a_tpus_memory_is_accelerator_memory(text: str) -> None:
    assert _rules(text, "gpu-oom") == {"gpu-oom"}


# ------------------------------------------------------------------ torch elastic's signal 11


def test_torch_elastic_reporting_exit_code_minus_11_is_a_segfault_not_an_abort() -> None:
    # alinlab/ifseg#7
    text = (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) local_rank: 0 (pid: 2012686) "
        "of binary: /gpfs/gsfs12/users/me/conda/envs/ifseg/bin/python3"
    )
    assert _rules(text, "segfault") == {"segfault"}


def test_the_root_cause_blocks_exitcode_minus_11_is_a_segfault() -> None:
    # NVIDIA/Megatron-LM#1880 (the block, without its traceback line)
    text = "  rank      : 0 (local_rank: 0)\n  exitcode  : -11 (pid: 6421)\n  error_file: <N/A>"
    assert "segfault" in _rules(text, "segfault")


def test_torch_elastic_reporting_another_signal_is_no_segfault() -> None:
    # open-mmlab/mmsegmentation#3106
    text = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -6) local_rank: 0 (pid: 2380846)"
    assert "segfault" not in _rules(text, "mpi-abort")


# ------------------------------------------------------------------ LAMMPS


def test_lammps_raising_the_error_it_would_abort_with_is_a_ranks_abort() -> None:
    # the error LAMMPS printed in lammps/lammps#4186, as its Python module raises it (``lammps.core``)
    text = (
        "lammps.core.MPIAbortException: 'ERROR on proc 71: step300299-ran out of space on angle_list: top=1052, "
        "max=1016 (../reaxc_valence_angles.cpp:414)\\nLast command: run 900000'"
    )
    assert _rules(text, "mpi-abort", stack="openmpi") == {"mpi-abort"}
    assert "Rank 71" in _cause(text, "mpi-abort", stack="openmpi")


def test_a_handler_of_lammps_exception_is_no_abort() -> None:
    # lammps/lammps, doc/src/Python_error.rst
    text = "from lammps import lammps, MPIAbortException\n    except MPIAbortException as ae:"
    assert "mpi-abort" not in _rules(text, None, stack="openmpi")


# ------------------------------------------------------------------ one failure, one finding
# The live reader keeps the exception a rank raised just above the launcher's account of its end, so
# the verdict read live already names it: the failure-time tail adds no second firing revision.


def test_a_ranks_exit_read_live_then_with_its_error_is_one_finding() -> None:
    # mit-han-lab/spvnas#65: the rank's own error, then mpirun's account of its exit
    text = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 106, in <module>\n'
        "    main()\n"
        '  File "train.py", line 23, in main\n'
        "    dist.init()\n"
        '  File "/opt/conda/envs/spvnas/lib/python3.8/site-packages/torchpack/distributed/context.py", line 15, '
        "in init\n"
        "    from mpi4py import MPI\n"
        "ModuleNotFoundError: No module named 'mpi4py'\n"
        "-------------------------------------------------------\n"
        "Primary job  terminated normally, but 1 process returned\n"
        "a non-zero exit code.. Per user-direction, the job has been aborted.\n"
        "-------------------------------------------------------\n"
        "--------------------------------------------------------------------------\n"
        "mpirun detected that one or more processes exited with non-zero status, thus causing\n"
        "the job to be terminated. The first process to do so was:\n"
        "\n"
        "  Process name: [[16228,1],3]\n"
        "  Exit code:    1\n"
        "--------------------------------------------------------------------------"
    )
    entry = Entry(id="t", file="t", stack="openmpi", where="log", expect="mpi-abort", text=text)
    outcome = run_live(entry)

    assert [f.rule for f in outcome.changes if f.status == "firing"].count("mpi-abort") == 1
    (finding,) = (f for f in outcome.firing if f.rule == "mpi-abort")
    assert finding.root_cause.endswith("ModuleNotFoundError: No module named 'mpi4py'")
