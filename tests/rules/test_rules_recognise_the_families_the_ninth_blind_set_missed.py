"""The families the blind set of 2026-11-30 showed missing, in other wordings than its own.

Each failure is a wording of its family from another thread: oneCCL's transport finding no libfabric
provider and Ascend's HCCL timing out on another NPU's rank (two new libraries, each with its own
sentence and steps); UCX's UD transport giving up on an endpoint without its ``UCX`` tag; TensorFlow's
collective executor aborting; Open MPI direct-launched by srun without Slurm's PMI support; a rank that
could not get NCCL's unique id from the c10d store (the store's, not NCCL's, failure); PyTorch's NPU
allocator and MXNet's storage manager out of device memory; Slurm's ``oom_kill`` events; the kubelet's
reasons as it spelt them before 1.2; and the launchers' accounts of a rank that ended the job — Open
MPI's ``exiting without calling "finalize"``, srun's task that exited, Lightning's observer, Ray's
actor that died. Each near-miss is the same library's words where nothing failed (a warning, a
setting, the step's cleanup), or real failure lines quoted only in a diff's added lines (a pull
request's documentation).
"""

from __future__ import annotations

import pytest

from tests.rules.corpus_replay import fires_alone, stays_quiet
from tests.rules.corpus_replay import root_cause_of as _cause
from tests.rules.corpus_replay import rules_fired as _rules

# ------------------------------------------------------------------ oneCCL and HCCL, new libraries

# intel/ipex-llm#11881
ONECCL_NO_PROVIDER = (
    "2024:08:21-10:41:21:( 8320) |CCL_ERROR| atl_ofi_helper.cpp:907 atl_ofi_get_prov_list: can't create "
    "providers for name shm"
)
# vllm-project/vllm-ascend#1955
HCCL_ESTABLISH = (
    "[ERROR] HCCL(2717288,python3):2025-07-23-03:49:57.177.194 [hccl_socket_manager.cc:778] "
    "[2734049][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[12] timeout[120]"
)


@pytest.mark.parametrize(
    ("text", "sentence", "steps"),
    [
        (
            ONECCL_NO_PROVIDER,
            "oneCCL's transport (its ATL over libfabric) could not open a network provider",
            ("fi_info", "FI_PROVIDER"),
        ),
        (
            HCCL_ESTABLISH,
            "HCCL timed out waiting on another NPU's rank",
            ("HCCL_CONNECT_TIMEOUT", "hccn_tool"),
        ),
    ],
    ids=["oneccl-no-provider", "hccl-establish-timeout"],
)
def test_a_new_librarys_failure_is_a_communication_failure_in_its_own_words(
    text: str, sentence: str, steps: tuple[str, ...]
) -> None:
    finding = fires_alone(text, "mpi-comm", stack="pytorch")

    assert sentence in finding.root_cause
    assert any(all(word in step for word in steps) for step in finding.remediation)


def test_oneccl_warning_that_it_switched_transport_is_no_failure() -> None:
    # intel/torch-ccl#48
    stays_quiet(
        "2023:06:23-03:36:46:(3742406) |CCL_WARN| did not find MPI-launcher specific variables, switch to "
        "ATL/OFI, to force enable ATL/MPI set CCL_ATL_TRANSPORT=mpi"
    )


def test_a_setting_of_hccls_timeout_is_no_failure() -> None:
    # vllm-project/afd-plugin#229
    stays_quiet("export HCCL_CONNECT_TIMEOUT=900")


# ------------------------------------------------------------------ UCX, TensorFlow's collectives, PMI


@pytest.mark.parametrize(
    ("text", "stack"),
    [
        # openucx/ucx#6522: UCX's UD transport, without the ``UCX`` tag
        (
            "[x1000c5s2b1n0:83417:0:83417]       ud_ep.c:263  Fatal: UD endpoint 0x20c1da0 to <no debug data>: "
            "unhandled timeout error",
            "mpich",
        ),
        # tensorflow/tensorflow#60706: the collective executor aborting its collectives
        (
            "2023-05-25 11:10:57.934361: E tensorflow/core/common_runtime/base_collective_executor.cc:249] "
            "BaseCollectiveExecutor::StartAbort DEADLINE_EXCEEDED: Deadline Exceeded",
            "tensorflow",
        ),
        # open-mpi/ompi#4338: Open MPI direct-launched by srun, its PMI help block
        (
            "[rhc001:111766] PMI_Get_universe_size [pmix_s2.c:288:s2_init]: Operation failed\n"
            "--------------------------------------------------------------------------\n"
            'The application appears to have been direct launched using "srun",\n'
            "but OMPI was not built with SLURM's PMI support and therefore cannot\n"
            "execute. There are several options for building PMI support under\n"
            "SLURM, depending upon the SLURM version you are using:\n"
            "--------------------------------------------------------------------------",
            "openmpi",
        ),
    ],
    ids=["ucx-ud-unhandled-timeout", "tf-collective-executor-deadline", "ompi-srun-without-pmi"],
)
def test_a_known_librarys_new_wording_is_its_communication_failure(text: str, stack: str) -> None:
    assert _rules(text, "mpi-comm", stack=stack) == {"mpi-comm"}


def test_the_sentence_of_a_launch_without_pmi_says_so() -> None:
    text = (
        "--------------------------------------------------------------------------\n"
        'The application appears to have been direct launched using "srun",\n'
        "but OMPI was not built with SLURM's PMI support and therefore cannot\n"
        "execute.\n"
        "--------------------------------------------------------------------------"
    )
    assert "could not start their PMI client" in _cause(text, "mpi-comm", stack="openmpi")


# ------------------------------------------------------------------ the c10d store's get of NCCL's id


def test_a_rank_that_could_not_get_nccls_unique_id_from_the_store_missed_the_rendezvous() -> None:
    # zai-org/ChatGLM-6B#1232 (torch's older spelling, ``retreiving``)
    text = (
        "RuntimeError: [1] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d "
        "key-value store by key '0', but store->get('0') got error: Socket Timeout"
    )
    assert _rules(text, "rendezvous", stack="pytorch") == {"rendezvous"}
    assert "could not get NCCL's unique id from rank 0 through the c10d store (Socket Timeout)" in _cause(
        text, "rendezvous", stack="pytorch"
    )


# ------------------------------------------------------------------ device memory


@pytest.mark.parametrize(
    "text",
    [
        # xingchensong/TouchNet#100: torch_npu's allocator
        "RuntimeError: NPU out of memory. Tried to allocate 5.03 GiB (NPU 3; 60.96 GiB total capacity; 49.47 GiB "
        "already allocated; 49.47 GiB current active; 1.32 GiB free; 57.55 GiB reserved in total by PyTorch)",
        # deepinsight/insightface#1240: MXNet after its retry
        "MXNetError: cudaMalloc retry failed: out of memory",
    ],
    ids=["npu", "mxnet-retry"],
)
def test_another_allocator_out_of_device_memory_is_gpu_oom(text: str) -> None:
    assert _rules(text, "gpu-oom") == {"gpu-oom"}


# ------------------------------------------------------------------ Slurm's oom_kill events


def test_slurms_oom_kill_events_with_an_underscore_are_an_oom_kill() -> None:
    # NBISweden/Earth-Biogenome-Project-pilot#81
    text = (
        "slurmstepd: error: Detected 1959 oom_kill events in StepId=45226719.batch. Some of the step tasks have "
        "been OOM Killed."
    )
    assert _rules(text, "oom") == {"oom"}


# ------------------------------------------------------------------ the kubelet's old reasons


def test_the_kubelets_lower_camel_case_reason_is_its_reason() -> None:
    # the kubelet before 1.2 spelt its reasons ``failedMount``; the message of vllm-project/aibrix#694
    message = (
        'MountVolume.SetUp failed for volume "kube-api-access-wfmh2" : write /var/lib/kubelet/pods/'
        "26af5e70-f9b9-4c12-a9de-dcf2d4e93689/volumes/kubernetes.io~projected/kube-api-access-wfmh2/"
        "..2025_02_18_00_11_37.99831085/namespace: no space left on device"
    )
    assert _rules(message, "disk-full", where="event", reason="failedMount") == {"disk-full"}


# ------------------------------------------------------------------ a rank that ended the job


@pytest.mark.parametrize(
    ("text", "stack", "said"),
    [
        # firemodels/fds#1899
        (
            "--------------------------------------------------------------------------\n"
            "mpirun has exited due to process rank 0 with PID 7336 on\n"
            'node fds001 exiting without calling "finalize". This may\n'
            "have caused other processes in the application to be\n"
            "terminated by signals sent by mpirun (as reported here).\n"
            "--------------------------------------------------------------------------",
            "openmpi",
            "Rank 0 on fds001 exited without calling MPI_Finalize",
        ),
        # ComputationalRadiationPhysics/picongpu#198
        ("srun: error: taurusi2031: tasks 10-11: Exited with exit code 1", "other", "Rank 10"),
        # ray-project/ray#18586 (Ray's older name for the error)
        (
            "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
            "other",
            "actor died unexpectedly",
        ),
        # the wording of the observer Lightning-AI/pytorch-lightning#18218 added, with Lightning's rank prefix
        (
            "[rank: 0] Child process with PID 4121 terminated with code 1. Forcefully terminating all other "
            "processes to avoid zombies",
            "pytorch",
            "exited with code 1",
        ),
    ],
    ids=["ompi-without-finalize", "srun-task-exit-code", "ray-actor-error", "lightning-child"],
)
def test_a_launchers_account_of_a_rank_that_ended_the_job_is_mpi_abort(
    text: str, stack: str, said: str
) -> None:
    assert _rules(text, "mpi-abort", stack=stack) == {"mpi-abort"}
    assert said in _cause(text, "mpi-abort", stack=stack)


def test_srun_terminating_the_other_tasks_is_no_abort() -> None:
    # hafs-community/HAFS#101: the step's cleanup, alone
    text = (
        "srun: Terminating job step 3495064.0\n"
        "slurmstepd: error: *** STEP 3495064.0 ON orion-01-01 CANCELLED AT 2021-10-27T19:35:36 ***"
    )
    assert "mpi-abort" not in _rules(text, None)


# ------------------------------------------------------------------ a diff's added side


@pytest.mark.parametrize(
    "text",
    [
        # the HCCL line of vllm-project/vllm-ascend#1955, as a pull request's added documentation quotes it
        "+A rank that never arrives shows, on the others:\n+\n+    " + HCCL_ESTABLISH + "\n+",
        # the OOM kill of equinor/ert#7797, quoted the same way (a Markdown quote in the added lines)
        "+> 2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, "
        "anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0\n"
        "+> 2024-04-29T14:55:46,947445+02:00 oom_reaper: reaped process 1440763 (perl), now anon-rss:0kB",
    ],
    ids=["hccl-docs", "oom-quote"],
)
def test_a_diffs_added_lines_alone_are_no_output(text: str) -> None:
    stays_quiet(text)


def test_the_same_lines_unsigned_are_output() -> None:
    assert _rules(HCCL_ESTABLISH, "mpi-comm") == {"mpi-comm"}
