"""The families the blind set of 2026-11-30d showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines: MXNet's signal handler, macOS's
shell and bash's job report on a process that died of its signal (``segfault``); the kubelet evicting a pod
for its node's memory (``oom``); Google Cloud's training service refusing a job for the project's quota
(``quota``); Open MPI's help texts without their dashed lines (``mpi-abort``, ``mpi-comm``); HCCL's
watchdog and CANN's task timeout, libfabric's EFA provider, NCCL's proxy socket, a CUDA call NCCL made
refused for its arguments (``mpi-comm``); the driver asking for a GPU reset, a sentence saying what a run
led to (``gpu-error``). Each near-miss names a family's words without reporting its failure.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import fires_alone, replayed, stays_quiet

# ------------------------------------------------------------------ segfault


@pytest.mark.parametrize(
    ("text", "stack", "said"),
    [
        (  # MXNet's handler (src/initialize.cc) in its older format, under mpirun's tag
            "[1,3]<stderr>:\n[1,3]<stderr>:Segmentation fault: 11\n[1,3]<stderr>:\n"
            "[1,3]<stderr>:Stack trace returned 7 entries:\n"
            "[1,3]<stderr>:[bt] (0) /opt/conda/lib/python3.8/site-packages/mxnet/libmxnet.so(+0x1a2b3c) "
            "[0x7f00aa1a2b3c]",
            "openmpi",
            "MXNet's native library",
        ),
        ("Bus error: 10", "other", "a bus error (SIGBUS)"),  # macOS's shell on a process killed by SIGBUS
        (  # bash on a script's command that died, its job number and the command after the signal's words
            "/workspace/run_worker.sh: line 31:   812 Segmentation fault      python -u train.py --epochs 90",
            "other",
            "a segmentation fault (SIGSEGV)",
        ),
    ],
    ids=["mxnet-handler-tagged", "macos-bus-error", "bash-job-report"],
)
def test_the_signals_words_said_by_a_handler_or_a_shell_are_a_crash(text: str, stack: str, said: str) -> None:
    finding = fires_alone(text, "segfault", stack=stack)
    assert said in finding.root_cause
    if "MXNet" in said:
        assert any("MXNET_ENGINE_TYPE=NaiveEngine" in step for step in finding.remediation)


# ------------------------------------------------------------------ evictions for memory

_EVICTED_NEW = (  # the kubelet's wording since 1.21: the threshold first, the request as "request is"
    "The node was low on resource: memory. Threshold quantity: 100Mi, available: 87340Ki. Container "
    "trainer was using 61Gi, request is 16Gi, has larger consumption of memory. "
)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (_EVICTED_NEW, "Evicted"),
        (  # a `kubectl get events` row pasted whole: the reason is the listing's column, not the event's
            "12m   Warning   Evicted   pod/worker-1   The node was low on resource: memory. Container worker "
            "was using 48Gi, which exceeds its request of 32Gi.",
            "",
        ),
    ],
    ids=["threshold-wording", "events-listing"],
)
def test_the_kubelet_evicting_a_pod_for_its_nodes_memory_is_the_hosts_memory_running_out(
    text: str, reason: str
) -> None:
    finding = fires_alone(text, "oom", where="event", reason=reason)
    assert "evicted" in finding.root_cause and "low on memory" in finding.root_cause
    assert any("Guaranteed" in step for step in finding.remediation)


def test_a_memory_eviction_in_a_run_that_succeeded_is_no_failure() -> None:
    # the evicted pod was replaced and the run went on to succeed
    outcome = replayed(_EVICTED_NEW, None, stack="other", where="event", reason="Evicted", succeed=True)
    assert outcome.rules == frozenset()


def test_an_eviction_for_pids_is_no_out_of_memory() -> None:
    text = "The node was low on resource: pids. Threshold quantity: 1000, available: 312. "
    assert "oom" not in replayed(text, None, stack="other", where="event", reason="Evicted").rules


# ------------------------------------------------------------------ quota


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (  # the Java client of Vertex AI, a list of metrics after the first
            "com.google.cloud.ai.platform.common.errors.AiPlatformException: code=RESOURCE_EXHAUSTED, "
            "message=The following quota metrics exceed quota limits: "
            "aiplatform.googleapis.com/custom_model_training_cpus, aiplatform.googleapis.com/"
            "custom_model_training_nvidia_t4_gpus",
            "aiplatform.googleapis.com/custom_model_training_cpus",
        ),
        (  # Cloud ML Engine (AI Platform Training) counting accelerators, our own project and count
            "ERROR: (gcloud.ai-platform.jobs.submit.training) RESOURCE_EXHAUSTED: Quota failure for project "
            "vision-research-17. The request for 8 V100 accelerators exceeds the allowed maximum of 4 V100.",
            "8 V100 accelerators",
        ),
    ],
    ids=["vertex-ai-java", "cloud-ml-engine"],
)
def test_google_clouds_training_service_refusing_a_job_for_its_quota_is_a_quota_refusal(
    text: str, named: str
) -> None:
    finding = fires_alone(text, "quota")
    assert named in finding.root_cause
    assert any("Google Cloud project" in step for step in finding.remediation)


# ------------------------------------------------------------------ Open MPI's help texts without dashes


@pytest.mark.parametrize(
    ("text", "rule", "said"),
    [
        (
            "mpiexec has exited due to process rank 3 with PID 7781 on\n"
            "node gpu-node-2 exiting improperly. There are three reasons this could occur:",
            "mpi-abort",
            "Rank 3",
        ),
        (  # a CI runner's clock before each line
            "09:14:55   mpirun has exited due to process rank 3 with PID 0 on\n"
            "09:14:55   node gpu-node-2 exiting improperly. There are three reasons this could occur:",
            "mpi-abort",
            "Rank 3",
        ),
        (
            "An MPI communication peer process has unexpectedly disconnected.  This\n"
            "usually indicates a failure in the peer process (e.g., a crash or\n"
            "otherwise exiting without calling MPI_FINALIZE first).\n\n"
            "  Local host: worker-0\n  Remote host: worker-3",
            "mpi-comm",
            "lost a peer",
        ),
    ],
    ids=["improper-exit-mpiexec", "improper-exit-ci-clock", "peer-disconnected"],
)
def test_open_mpis_help_text_without_its_dashes_is_the_programs(text: str, rule: RuleId, said: str) -> None:
    assert said in fires_alone(text, rule, stack="openmpi").root_cause


# ------------------------------------------------------------------ the mesh


@pytest.mark.parametrize(
    ("text", "stack", "library"),
    [
        (  # torch_npu's watchdog over HCCL, another op and timeout than the set's
            "[rank3]:[E1102 04:10:55.552100 compiler_depend.ts:560] [Rank 3] Watchdog caught collective "
            "operation timeout: WorkHCCL(SeqNum=12, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800412 "
            "milliseconds before timing out.",
            "pytorch",
            "HCCL",
        ),
        (  # CANN's runtime on an HCCL task of another device that timed out
            "The error from device(chipId:2, dieId:0), serial number is 4, hccl fftsplus task timeout "
            "occurred during task execution, stream_id:3, sq_id:3, task_id:411, stuck notify num:1, "
            "timeout:1800.[FUNC:ProcessStarsHcclFftsPlusTimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1640]",
            "other",
            "HCCL",
        ),
        (  # libfabric's EFA provider: an error entry it could not report, another errno and source
            "Unable to write to EQ: Missing or unavailable event queue. err: Connection timed out (110) "
            "prov_errno: Unknown error -3 (-3) prov/efa/src/rdm/efa_rdm_ep.c:512",
            "libfabric",
            "EFA",
        ),
        (  # NCCL's proxy thread, host and operation ours
            "trainer-7:5120:5133 [3] transport/net.cc:1290 NCCL WARN Socket recv failed while polling for "
            "opId=0x7f3a10c0d2e0",
            "nccl",
            "NCCL",
        ),
        (  # NCCL's CUDA call refused for its device, not a fault of the GPU
            "[rank2]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL "
            "version 2.21.5\n[rank2]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
            "[rank2]: Last error:\n[rank2]: Cuda failure 101 'invalid device ordinal'",
            "nccl",
            "",
        ),
    ],
    ids=["hccl-watchdog", "cann-hccl-task-timeout", "efa-eq", "nccl-proxy-socket", "nccl-cuda-refused"],
)
def test_a_mesh_failure_in_another_libraries_words_is_a_communication_failure(
    text: str, stack: str, library: str
) -> None:
    assert library in fires_alone(text, "mpi-comm", stack=stack).root_cause


# ------------------------------------------------------------------ GPU errors


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "[ 8812.441201] NVRM: _kgspRpcRecvPoll: GSP RPC failed: status NV_ERR_RESET_REQUIRED (0x00000062) "
            "for function ALLOC_CHANNEL_DMA",
            "NV_ERR_RESET_REQUIRED",
        ),
        (
            "Fine-tuning on the eight H100s of that node resulted in `CUDA error: uncorrectable ECC error "
            "encountered` after about an hour.",
            "ECC",
        ),
    ],
    ids=["gsp-reset-required", "sentence-of-what-it-resulted-in"],
)
def test_the_driver_asking_for_a_reset_and_a_reported_ecc_error_are_gpu_errors(text: str, said: str) -> None:
    assert said in fires_alone(text, "gpu-error", stack="cuda").root_cause


# ------------------------------------------------------------------ near-misses


@pytest.mark.parametrize(
    ("text", "stack"),
    [
        ("What does `Segmentation fault: 11` mean on macOS, and how do I get a stack?", "other"),
        ("If you see `The following quota metrics exceed quota limits`, request more quota in IAM.", "other"),
        (
            "Skipping a node that would lead to `CUDA error: uncorrectable ECC error encountered` may help.",
            "cuda",
        ),
        (
            "Running without enough pinned memory may lead to `CUDA error: uncorrectable ECC error encountered`",
            "cuda",
        ),
        (
            "To avoid `Watchdog caught collective operation timeout: WorkHCCL`, raise HCCL_EXEC_TIMEOUT.",
            "other",
        ),
        ("The EFA provider may print `Unable to write to EQ` when the event queue is missing.", "libfabric"),
        ("What does `Socket recv failed while polling` in the NCCL proxy mean?", "nccl"),
    ],
    ids=[
        "segfault-asked",
        "quota-hint",
        "ecc-hypothetical",
        "ecc-may-lead",
        "hccl-advice",
        "efa-may",
        "nccl-asked",
    ],
)
def test_a_familys_words_named_without_its_failure_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
