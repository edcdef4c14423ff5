"""The families the blind set of 2026-11-30b showed missing, in other wordings than its own.

Each failure is a wording of its family from another thread: the c10d store timing out without a count
or an address, and Horovod's Gloo workers giving up on the launcher's HTTP store (``rendezvous``); a
person's sentence naming the error class the run raised, or quoting a launcher's line, read as that
output; Ray's memory monitor killing workers and the kernel's OOM frames in a call trace printed apart
(``oom``); the TPU runtime unable to allocate a device buffer in HBM (``gpu-oom``); HCCL unable to set up
its transport, Open MPI unable to open a transport component before ``MPI_INIT`` fails, and NCCL's
watchdog line cut after its count (``mpi-comm``); Hydra's ``EXIT CODE: 9`` and DeepSpeed's launcher's
``return code = -9`` (``mpi-abort``) or ``-11`` (``segfault``); and the kubelet's eviction for the node's
disk relayed into a CI runner's log (``disk-full``). Each near-miss is the same words where nothing
failed: a maintainer explaining the launcher's exit code, a sentence naming an error class to avoid.
"""

from __future__ import annotations

import pytest

from tests.rules.corpus_replay import fires_alone, stays_quiet
from tests.rules.corpus_replay import root_cause_of as _cause
from tests.rules.corpus_replay import rules_fired as _rules

# ------------------------------------------------------------------ rendezvous


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # hiyouga/LlamaFactory#6154: the store's error, bare
        ("torch.distributed.DistStoreError: Socket Timeout", "(DistStoreError: Socket Timeout)"),
        # pytorch/pytorch#131808: the wording that replaced it, with the keys waited on
        (
            "DistStoreError: wait timeout after 100ms, keys: /the_key",
            "(DistStoreError: wait timeout after 100ms)",
        ),
    ],
    ids=["socket-timeout", "wait-timeout"],
)
def test_the_c10d_store_timing_out_on_a_wait_is_a_missed_rendezvous(text: str, said: str) -> None:
    assert said in fires_alone(text, "rendezvous", stack="pytorch").root_cause


def test_horovods_gloo_workers_giving_up_on_the_http_store_missed_the_rendezvous() -> None:
    # horovod/horovod#2746 (Horovod on Ray)
    text = (
        "(pid=11118) [2021-03-26 08:37:42.910981: E /tmp/pip-install-1br0pr96/horovod_284c8b944a414cd09d36e9484a"
        "ce2798/horovod/common/gloo/http_store.cc:96] HTTP GET request failed too many times, aborting. See "
        "exception message above.\n"
        "(pid=11118) terminate called after throwing an instance of 'std::runtime_error'"
    )
    assert "HTTP rendezvous store" in fires_alone(text, "rendezvous", stack="horovod").root_cause


def test_a_sentence_naming_the_error_class_the_run_raised_is_read_as_that_output() -> None:
    # our own sentence, in a reporter's register, naming the error pytorch/pytorch#147064 reproduced
    text = "After restarting the second agent I encountered RendezvousClosedError on the first node."
    assert _rules(text, "rendezvous", stack="pytorch") == {"rendezvous"}


def test_a_sentence_advising_how_to_avoid_the_error_class_is_no_failure() -> None:
    stays_quiet(
        "If you get RendezvousTimeoutError, raise --rdzv-conf join_timeout so the slower nodes arrive."
    )


# ------------------------------------------------------------------ host memory


@pytest.mark.parametrize(
    "text",
    [
        # hiyouga/EasyR1#185: the raylet's periodic summary
        "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / "
        "actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
        "351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the last time period.",
        # real-stanford/flingbot#11: the task's error, raised in the driver
        "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
        # containerd/cgroups#74: a memory cgroup's OOM call trace, its headline apart
        "Dec 11 10:49:37 fkhan-test-kernelv4 kernel: Call Trace:\n"
        "Dec 11 10:49:37 fkhan-test-kernelv4 kernel: dump_stack+0x63/0x88\n"
        "Dec 11 10:49:37 fkhan-test-kernelv4 kernel: oom_kill_process+0x262/0x290\n"
        "Dec 11 10:49:37 fkhan-test-kernelv4 kernel: out_of_memory+0x140/0x4b0\n"
        "Dec 11 10:49:37 fkhan-test-kernelv4 kernel: mem_cgroup_out_of_memory+0x4b/0x80",
    ],
    ids=["raylet-memory-pressure", "ray-task-killed", "memcg-call-trace"],
)
def test_a_kill_for_host_memory_is_an_oom(text: str) -> None:
    assert _rules(text, "oom") == {"oom"}


# ------------------------------------------------------------------ device memory


def test_the_tpu_runtime_unable_to_allocate_a_device_buffer_is_gpu_oom() -> None:
    # googlecolab/colabtools#5126
    text = (
        "RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to "
        "allocate 129.50M. That was not possible. There are 78.17M free.; (0x0x0_HBM0)"
    )
    assert _rules(text, "gpu-oom", stack="jax") == {"gpu-oom"}


# ------------------------------------------------------------------ the mesh


def test_hccl_unable_to_set_up_its_transport_is_a_communication_failure() -> None:
    # vllm-project/vllm-ascend#2643
    text = (
        "(VllmWorker rank=3 pid=50935) ERROR 09-10 03:36:31 [multiproc_executor.py:527]         Transport init "
        "error. Reason: [Create][DestLink]Create Dest error! creakLink para:rank[7]-localUserrank[7]-localIpAddr"
        "[192.168.1.3], dst_rank[9]-remoteUserrank[9]-remote_ip_addr[192.168.1.4]\n"
        "[rank7]: EI0009: Transport init error."
    )
    finding = fires_alone(text, "mpi-comm", stack="pytorch")
    assert "HCCL could not set up its transport to another NPU's rank" in finding.root_cause


def test_open_mpi_unable_to_open_a_transport_component_is_a_communication_failure() -> None:
    # openucx/ucx#8440: the pml framework's ucx component, in Open MPI's help text
    text = (
        "--------------------------------------------------------------------------\n"
        "A requested component was not found, or was unable to be opened.  This\n"
        "means that this component is either not installed or is unable to be\n"
        "used on your system (e.g., sometimes this means that shared libraries\n"
        "that the component requires are unable to be found/loaded).  Note that\n"
        "Open MPI stopped checking at the first component that it did not find.\n"
        "\n"
        "Host:      node001\n"
        "Framework: pml\n"
        "Component: ucx\n"
        "--------------------------------------------------------------------------\n"
        "--------------------------------------------------------------------------\n"
        "It looks like MPI_INIT failed for some reason; your parallel process is\n"
        "likely to abort.  There are"
    )
    assert _rules(text, "mpi-comm", stack="openmpi") == {"mpi-comm"}


def test_nccls_watchdog_line_cut_after_its_count_is_still_a_timeout() -> None:
    # the line of hiyouga/LlamaFactory#7396 as a title would cut it
    text = (
        "[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
        "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600067 m"
    )
    assert _rules(text, "mpi-comm", stack="pytorch") == {"mpi-comm"}


# ------------------------------------------------------------------ a rank that ended the job


def test_hydras_exit_code_9_is_a_rank_killed() -> None:
    # je-santos/MPLBM-UT#92
    text = (
        "===================================================================================\n"
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        "=   PID 92248 RUNNING AT fzh-desktop\n"
        "=   EXIT CODE: 9\n"
        "=   CLEANING UP REMAINING PROCESSES\n"
        "=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES\n"
        "==================================================================================="
    )
    assert _rules(text, "mpi-abort", stack="mpich") == {"mpi-abort"}


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        # deepspeedai/DeepSpeedExamples#626: a rank that died of SIGSEGV
        (
            "[2023-07-10 04:26:35,999] [ERROR] [launch.py:324:sigkill_handler] ['/venv/bin/python3.10', '-u', "
            "'trainCLM.py', '--local_rank=1', '--deepspeed', 'config/deepspeed_config.json'] exits with return "
            "code = -11",
            "segfault",
        ),
        # deepspeedai/DeepSpeed#4063: a title quoting the launcher's words alone
        ("[BUG] exits with return code = -11", "segfault"),
        # deepspeedai/DeepSpeed#4890: a title quoting the launcher's -9
        ("[BUG] [ERROR] [launch.py:321:sigkill_handler [xxx] exits with return code = -9", "mpi-abort"),
    ],
    ids=["launcher-minus-11", "title-minus-11", "title-minus-9"],
)
def test_deepspeeds_launcher_on_a_rank_a_signal_ended(text: str, rule: str) -> None:
    assert _rules(text, None, stack="deepspeed") == {rule}


def test_a_maintainer_explaining_the_launchers_exit_code_is_no_failure() -> None:
    # deepspeedai/DeepSpeed#4264
    stays_quiet(
        'Hi @Anonymousplendid - the "exits with return code = -11" means you are encountering a seg fault.',
        stack="deepspeed",
    )


# ------------------------------------------------------------------ the node's disk, relayed


def test_the_kubelets_eviction_for_the_nodes_disk_relayed_in_a_log_is_disk_full() -> None:
    # actions/actions-runner-controller#2695: the runner pod's eviction, as a describe listing relays it
    text = (
        "  Warning  Evicted              44s   kubelet  The node was low on resource: ephemeral-storage. "
        "Container runner was using 3914072Ki, which exceeds its request of 0. Container docker was using "
        "91249008Ki, which exceeds its request of 0."
    )
    assert "ephemeral storage" in _cause(text, "disk-full", stack="kubernetes")
