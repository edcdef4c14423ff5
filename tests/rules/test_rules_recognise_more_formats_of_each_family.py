"""More formats of the families the blind sets of 2026-11-28b and 2026-11-28c showed missing, in other wordings.

Each case is a wording of a family taken from the printing library's own formats (its source:
libfabric's EFA status strings, aws-ofi-nccl's address-vector insertion, ORTE / PRRTE's error log
and routing help texts, Open MPI's openib help texts, rabit's ``Socket <call> Error``, Horovod's
op names and its oldest stall format, NCCL's proxy calls, XLA's ``RESOURCE_EXHAUSTED`` status,
the kernel's memory-cgroup report before 4.19, strsignal's wording on macOS, the kubelet's
Warning events), never a line of the blind set itself. Near-misses of the same families stay
quiet: help texts that explain a failure, and a network plugin NCCL fell back from.
"""

from __future__ import annotations

import pytest

from consumers.rules import RuleEngine
from consumers.rules.families import family_failures
from controller.contract.events import BusEvent, JobSpecSummary
from controller.contract.findings import Finding
from controller.testing.events import at, job, launcher, log_seen, replay, spec, worker
from tests.rules.corpus_replay import fires_alone, replayed, stays_quiet


def _lands_in_its_family(text: str, library: str, verb: str, words: str) -> None:
    """The first family failure ``text`` shows is ``library``'s ``verb``; its mpi-comm finding says ``words``."""
    hits = family_failures(tuple(text.splitlines()))
    finding = fires_alone(text, "mpi-comm")

    assert [(h.group("library"), h.group("verb")) for h in hits][:1] == [(library, verb)]
    assert words in finding.root_cause


# (text, library key, verb, words of the finding)
MESH = {
    "efa-completion-reset-by-peer": (
        "libfabric:4242:1700000000::efa:cq:efa_rdm_rxe_handle_error():551<warn> err: 104, message: Connection "
        "was reset by remote peer (8)",
        "efa",
        "completion",
        "failed transfer with a peer",
    ),
    "efa-unresponsive-receiver": (
        "libfabric:4242:1700000000::efa:cq:efa_rdm_pke_handle_tx_error():210<warn> Unresponsive receiver "
        "(connection previously established) (4124)",
        "efa",
        "lost",
        "unresponsive",
    ),
    "efa-address-vector-insertion": (
        "libfabric:4242:1700000000::efa:av:efa_av_insert_one():380<warn> Failure inserting address into "
        "address vector (4110)",
        "efa",
        "resource",
        "could not open a resource of its transport",
    ),
    "prrte-error-log-unreachable": (
        "[pi-launcher:00042] [[4242,0],0] PRTE_ERROR_LOG: Unreachable in file grpcomm_direct.c at line 605",
        "prrte",
        "unreachable",
        "could not be reached",
    ),
    "orte-route-help-wrapped": (
        "ORTE does not know how to route a message to the specified daemon\n"
        "located on the indicated node:\n"
        "\n"
        "  my node:   pi-worker-0\n"
        "  target node:  pi-worker-1",
        "ompi",
        "unreachable",
        "could not be reached",
    ),
    "openib-help-wrapped-queue": (
        "The OpenFabrics (openib) BTL failed to initialize while trying to\n"
        "create a completion queue.  This typically indicates a failed\n"
        "OpenFabrics installation or faulty hardware.",
        "ompi",
        "resource",
        "could not open a resource of its transport",
    ),
    "rabit-socket-accept-error": (
        "[10:42:07] Socket Accept Error:Bad file descriptor",
        "xgboost",
        "connect",
        "XGBoost",
    ),
    "horovod-stall-op-names-only": (
        "Stalled ops:\nHorovodAllreduce_gradients_dense_kernel_0 [missing ranks: 2, 3]",
        "horovod",
        "stalled",
        "stall inspector",
    ),
    "horovod-oldest-ready-ranks": (
        "HorovodAllgather_embeddings_0 [ready ranks: 0, 1, 2]",
        "horovod",
        "stalled",
        "all but the ready ones",
    ),
    "nccl-proxy-call-after-last-error": (
        "[rank3]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
        "error.\n[rank3]: Last error:\n[rank3]: Proxy Call to rank 5 failed (Setup)",
        "nccl",
        "connect",
        "connection",
    ),
    "aws-ofi-nccl-av-insert-negative-rc": (
        "pi-worker-1:42:99 [0] nccl_net_ofi_rdma.c:4242 NCCL WARN NET/OFI Unable to insert remote address into "
        "address vector for device 0. RC: -22",
        "nccl",
        "resource",
        "address vector",
    ),
    "torch-exception-raised-in-its-package": (
        # a collective's frame: the same reset under the store's creation is the rendezvous's (torch's store
        # client retries a connect on a reset as on a refusal: ``… - retrying (try=N, …): Connection reset``)
        'Traceback (most recent call last):\n  File "/usr/lib/python3/site-packages/torch/distributed/'
        'distributed_c10d.py", line 2050, in all_reduce\n    work = group.allreduce([tensor], opts)\n'
        "RuntimeError: Connection reset by peer",
        "torch",
        "reset",
        "reset",
    ),
    "deepspeed-runner-exception-host-unreachable": (
        'Traceback (most recent call last):\n  File "/opt/venv/lib/python3.10/site-packages/deepspeed/launcher/'
        'runner.py", line 420, in main\n    raise RuntimeError(\nRuntimeError: host pi-worker-3 is not reachable '
        "via ssh",
        "launcher",
        "unreachable",
        "hostfile over ssh",
    ),
}


@pytest.mark.parametrize("case", MESH.values(), ids=MESH.keys())
def test_a_new_wording_of_a_known_family_lands_in_it(case: tuple[str, str, str, str]) -> None:
    _lands_in_its_family(*case)


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-02 03:04:05.000001: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2985] Execution of "
        "replica 1 failed: RESOURCE_EXHAUSTED: Failed to allocate request for 2.00GiB (2147483648B) on device "
        "ordinal 1",
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 17.2G of "
        "15.48G hbm.",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: Resource exhausted: OOM when allocating "
        "tensor with shape[8192,8192]",
    ],
    ids=["pjrt-failed-to-allocate", "jax-ran-out-of-hbm", "tf-older-status-wording"],
)
def test_xlas_resource_exhausted_status_naming_memory_is_a_gpu_oom(text: str) -> None:
    finding = fires_alone(text, "gpu-oom", stack="jax")

    assert "RESOURCE_EXHAUSTED" in finding.root_cause or "OOM" in finding.root_cause


def test_an_xla_resource_exhausted_status_about_no_memory_is_no_gpu_oom() -> None:
    text = "grpc._channel._InactiveRpcError: RESOURCE_EXHAUSTED: Received message larger than max (8388608 vs. 4194304)"

    assert "gpu-oom" not in replayed(text, None, stack="other").rules


def test_the_kernels_older_memory_cgroup_report_is_an_oom_kill() -> None:
    text = (
        "[ 4242.123456] Task in /kubepods/burstable/pod1b2c/5f6e7d killed as a result of limit of "
        "/kubepods/burstable/pod1b2c\n"
        "[ 4242.123460] memory: usage 2097152kB, limit 2097152kB, failcnt 42"
    )

    finding = fires_alone(text, "oom", stack="linux")

    assert "out of memory" in finding.root_cause


def test_open_mpis_signal_report_in_macos_wording_is_a_segfault() -> None:
    text = (
        "[pi-launcher:04242] *** Process received signal ***\n"
        "[pi-launcher:04242] Signal: Segmentation fault: 11 (11)\n"
        "[pi-launcher:04242] Signal code: Address not mapped (1)"
    )

    fires_alone(text, "segfault", stack="openmpi")


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        (
            "FailedCreatePodSandBox",
            "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create containerd task: "
            "mkdir /run/containerd/io.containerd.runtime.v2.task/k8s.io/4f2a: no space left on device",
        ),
        (
            "Failed",
            'Failed to pull image "registry.local/train:1.2": rpc error: code = Unknown desc = failed to extract '
            "layer sha256:4f2a: write /var/lib/containerd/tmpmounts/x/usr/lib/libcudnn.so.9: no space left on device",
        ),
    ],
    ids=["sandbox", "image-pull"],
)
def test_a_kubelet_warning_that_the_nodes_disk_is_full_is_a_disk_full(reason: str, message: str) -> None:
    finding = fires_alone(message, "disk-full", stack="kubernetes", where="event", reason=reason)

    assert "no space left on device on the node" in finding.root_cause
    assert any("DiskPressure" in step for step in finding.remediation)


NEAR = {
    "gpu-oom-quoted-as-a-kind-of-error": '"CUDA out of memory" errors are mostly caused by too large a batch '
    "for the card.",
    "gpu-oom-explained": "RuntimeError: CUDA out of memory usually comes from activations kept for the "
    "backward pass; checkpoint them.",
    "disk-full-help-will-trigger": "A /dev/shm smaller than the batches will trigger OSError: [Errno 28] No "
    "space left on device in the DataLoader workers.",
    "nccl-fallback-after-plugin-failure": (
        "pi-worker-0:42:42 [0] nccl_net_ofi_init:1520 NCCL WARN NET/OFI Couldn't open a fabric provider. RC: "
        "-61, ERROR: No data available\n"
        "pi-worker-0:42:42 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.2.9<0>\n"
        "pi-worker-0:42:42 [0] NCCL INFO Using network IB"
    ),
    "efa-advice-after-the-words": "libfabric:4242:1700000000::efa:core:efa_prov_info():99<warn> To avoid "
    "Unresponsive receiver errors, allow all traffic in the security group",
}


@pytest.mark.parametrize("text", NEAR.values(), ids=NEAR.keys())
def test_a_text_that_explains_a_failure_or_a_fallback_that_went_on_fires_nothing(text: str) -> None:
    stays_quiet(text, stack="nccl")


def _three_ranks() -> list[BusEvent]:
    small = JobSpecSummary.model_validate({**spec(workers=1).model_dump(), "slots_per_worker": 3})
    return [job("Running", job_spec=small), launcher(), worker(0)]


def test_horovods_oldest_stall_format_names_the_ranks_that_did_not_submit() -> None:
    lines = (
        "[1,0]<stderr>:One or more tensors were submitted to be reduced, gathered or broadcasted by subset of "
        "ranks and are waiting for remainder of ranks for more than 60 seconds. This may indicate that different "
        "ranks are trying to submit different tensors or that only subset of ranks is submitting tensors, which "
        "will cause deadlock.",
        "[1,0]<stderr>:Stalled ops:",
        "[1,0]<stderr>:HorovodAllreduce_gradients_0 [ready ranks: 0, 2],",
    )
    engine = RuleEngine()
    replay(engine, _three_ranks())
    engine.observe(log_seen(*(f"[1,{r}]<stdout>:step 7" for r in range(3)), observed_at=at(1)), at(1))
    changes: list[Finding] = []
    for minute in range(5, 45, 5):
        changes += engine.observe(log_seen(*lines, observed_at=at(minute)), at(minute))

    (hang,) = [f for f in changes if f.rule == "hang-progress" and f.status == "firing"]
    assert "Horovod's stall inspector names rank 1" in hang.root_cause


# ---------------------------------------------------------------- learnt from the blind set of 2026-11-28c
# Other wordings of the families it showed missing, from the printing library's own formats (c10d's
# socket.cpp and TCPStore.cpp, Hydra's pmip_cb.c, ORTE / PRRTE's routed components, Open MPI's TCP
# BTL help, Open MPI's PSM2 MTL, MPICH CH3's error stack, XLA's clique locking, ssh and DeepSpeed's
# runner, scheduler-plugins' capacity scheduling, TensorFlow's save ops), never a line of the set.

MESH_C = {
    "hydra-proxy-control-socket-closed": (
        "[proxy:0:1@worker-1] HYD_pmcd_pmip_control_cmd_cb (pm/pmiserv/pmip_cb.c:887): assert (!closed) failed",
        "hydra",
        "lost",
        "lost a proxy's connection",
    ),
    "prrte-routed-lifeline-lost": (
        "[worker-1:00077] [prte-launcher-42@0,1] routed:radix: Connection to lifeline [prte-launcher-42@0,0] lost",
        "prrte",
        "lost",
        "lost a daemon's lifeline",
    ),
    "open-mpi-tcp-btl-failed-to-tcp-connect": (
        "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This should not happen.",
        "ompi",
        "connect",
        "could not establish a connection",
    ),
    "psm2-mtl-could-not-open-context": (
        "mtl_psm2.c:310 psm2_ep_open failed: Could not open context (err=23)",
        "psm2",
        "resource",
        "Omni-Path (hfi) endpoint",
    ),
    "mpich-ch3-channel-initialisation": (
        "Fatal error in MPI_Init: Other MPI error, error stack:\n"
        "MPID_Init(241).......: channel initialization failed\n"
        "rdma_open_hca(1069)..: No IB device found",
        "mpich",
        "resource",
        "MPI_Init failed in the MPICH-family library",
    ),
    "xla-clique-leader-never-marked-complete": (
        "2026-11-28 10:00:00.000000: E external/xla/xla/service/gpu/nccl_clique.cc:151] This thread has been "
        "waiting for `acquire clique for rank 3` for 20 seconds and may be stuck. All 8 threads joined the "
        "rendezvous, however the leader has not marked the rendezvous as completed.",
        "xla",
        "stalled",
        "never joined the clique",
    ),
    "ssh-launch-exit-255": (
        "subprocess.CalledProcessError: Command 'ssh -o PasswordAuthentication=no worker-1 nproc' returned "
        "non-zero exit status 255.",
        "ssh",
        "spawn",
        "ssh could not reach a worker",
    ),
    "ssh-connect-refused": (
        "ssh: connect to host worker-2 port 22: Connection refused",
        "ssh",
        "refused",
        "refused",
    ),
}


@pytest.mark.parametrize("case", MESH_C.values(), ids=MESH_C.keys())
def test_more_libraries_and_verbs_of_the_mesh_land_in_their_family(case: tuple[str, str, str, str]) -> None:
    _lands_in_its_family(*case)


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            "torch.distributed.DistNetworkError: The client socket has timed out after 900000ms while trying "
            "to connect to (pt-master-0, 23456).",
            "pt-master-0:23456 within 900s",
        ),
        (
            "[E1128 10:00:01.000000 42 TCPStore.cpp:347] [c10d] TCP client failed to connect/validate to host "
            "job-master-0:29500 - timed out (try=2, timeout=900000ms): connect() failed",
            "job-master-0:29500",
        ),
        (
            "[E socket.cpp:860] [c10d] The client socket has failed to connect to any network address of "
            "(trainer-master-0.ns.svc, 29400).",
            "trainer-master-0.ns.svc:29400",
        ),
    ],
    ids=["timed-out-in-ms", "tcpstore-validate-timed-out", "every-address-failed"],
)
def test_the_c10d_store_client_failing_to_reach_rank_0_is_a_rendezvous_not_the_mesh(
    text: str, where: str
) -> None:
    finding = fires_alone(text, "rendezvous", stack="pytorch")

    assert where in finding.root_cause


def test_a_c10d_store_client_that_retries_is_no_finding() -> None:
    text = (
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to [job-master-0]:29500 (errno: 111 - "
        "Connection refused).\n"
        "[W1128 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host job-master-0:29500 - "
        "retrying (try=0, timeout=900000ms, delay=312ms): connect() failed"
    )
    stays_quiet(text, stack="pytorch")


@pytest.mark.parametrize(
    ("reason", "message", "words"),
    [
        (
            "FailedCreate",
            'Error creating: pods "train-worker-0" is forbidden: Failed quota: gpu-quota: must specify '
            "requests.nvidia.com/gpu",
            "ResourceQuota gpu-quota requires requests.nvidia.com/gpu",
        ),
        (
            "FailedScheduling",
            "Pod team-a/train-worker-0 is rejected in PreFilter because ElasticQuota team-a is more than Max",
            "ElasticQuota team-a would go over its Max",
        ),
        (
            "FailedScheduling",
            "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 ExceedsNamespaceQuota.",
            "ExceedsNamespaceQuota",
        ),
    ],
    ids=["failed-quota-capitalised", "capacity-scheduling-elastic-quota", "extender-quota-reason"],
)
def test_a_quota_refusal_in_another_wording_or_from_the_scheduler_is_a_quota(
    reason: str, message: str, words: str
) -> None:
    finding = fires_alone(message, "quota", stack="kubernetes", where="event", reason=reason)

    assert words in finding.root_cause


def test_a_scheduling_failure_naming_no_quota_is_no_quota() -> None:
    text = "0/6 nodes are available: 2 Insufficient nvidia.com/gpu, 4 node(s) had untolerated taint."

    assert "quota" not in replayed(text, None, stack="other", where="event", reason="FailedScheduling").rules


def test_tensorflows_resource_exhausted_naming_a_file_is_a_full_disk_not_a_gpu_oom() -> None:
    text = (
        "W tensorflow/core/framework/op_kernel.cc:1651] OP_REQUIRES failed at save_restore_v2_ops.cc:137 : "
        "Resource exhausted: /data/ckpt/model.ckpt-100_temp/part-00000-of-00001.data-00000-of-00001.tempstate"
    )

    finding = fires_alone(text, "disk-full", stack="tensorflow")

    assert "Resource exhausted" in finding.root_cause


NEAR_C = {
    "disk-full-reported-as-fixed": "This release fixes the DataLoader, which previously failed with No space "
    "left on device when /dev/shm was small.",
    "disk-full-quoted-as-what-a-tool-prints": "The tool only prints 'No space left on device' even when it is "
    "the inodes that ran out.",
}


@pytest.mark.parametrize("text", NEAR_C.values(), ids=NEAR_C.keys())
def test_a_failure_told_as_past_or_quoted_fires_nothing(text: str) -> None:
    stays_quiet(text)
