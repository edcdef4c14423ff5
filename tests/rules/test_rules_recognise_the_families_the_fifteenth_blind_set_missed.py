"""The families the blind set of 2026-11-30g showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: the
communication layers of PGAS and RPC runtimes and their launchers — GASNet's conduits, Sandia OpenSHMEM,
Mercury's NA plugins, NVSHMEM's transports, charmrun's remote shell, MS-MPI's smpd, PaddlePaddle's
parameter-server clients (``mpi-comm``); HPE MPT and Charm++'s ``CmiAbort`` ending a rank
(``mpi-abort``); the amdgpu driver's page faults and ring timeouts, Intel's Level Zero losing its device,
an Ascend core's fault (``gpu-error``); PyTorch's MPS backend and HIP's driver status out of memory
(``gpu-oom``); Moab's memory limit and systemd-oomd (``oom``); the kubelet's image garbage collector
unable to free the disk (``disk-full``); the quota admission unable to count a quota and Gatekeeper's
webhook refusing a pod (``quota``); R's handler catching a crash (``segfault``). Each near-miss names a
family's words without reporting its failure: advice, a recovered timeout, a warning, documentation.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_MPI_COMM: dict[str, Wording] = {
    # GASNet's ofi-conduit, its GASNETC_OFI_CHECK_RET on another libfabric object (GASNet ofi-conduit
    # gasnet_ofi.c, as chapel-lang/chapel vendors it)
    "gasnet-ofi-domain": (
        "*** FATAL ERROR (proc 3): in gasnetc_ofi_init() at /opt/gasnet/ofi-conduit/gasnet_ofi.c:1290: "
        "fi_domain failed: -61(No data available)",
        "GASNet's ofi-conduit could not open a libfabric object",
        "GASNET_OFI_PROVIDER",
        "libfabric",
    ),
    # Sandia OpenSHMEM's OFI transport finding no provider, then its heap's post-init failing (its
    # transport_ofi.c query_for_fabric and init.c, the RAISE_*_MSG format: PE tag, then the message)
    "sos-no-fabric-services": (
        "[0003] WARN:  transport_ofi.c:1604: query_for_fabric\n"
        "[0003]        OFI transport did not find any valid fabric services (provider=psm3)\n"
        "[0003] ERROR: init.c:310: shmem_internal_heap_postinit\n"
        "[0003]        Transport init failed (-61)",
        "could not initialise its OFI transport",
        "SHMEM_OFI_PROVIDER",
        "libfabric",
    ),
    # Mercury's NA OFI plugin reading a completion's error entry (mercury-hpc/mercury src/na/na_ofi.c)
    "mercury-cq-readerr-permission": (
        "# NA -- Error -- /build/mercury/src/na/na_ofi.c:3512\n"
        " # na_ofi_cq_read(): fi_cq_readerr got err: 13(Permission denied), prov_errno: 0(Success).",
        "Mercury's NA OFI plugin got an error completing a transfer",
        "HG_LOG_LEVEL",
        "libfabric",
    ),
    # NVSHMEM's UCX remote transport failing to connect its endpoints (NVIDIA/nvshmem
    # src/modules/transport/ucx, the NVSHMEMI_NZ_ERROR_JMP format)
    "nvshmem-ucx-connect-endpoint": (
        "/opt/nvshmem/src/modules/transport/ucx/ucx.cpp:1290: non-zero status: 7 Failed to connect endpoint "
        "in UCX transport",
        "NVSHMEM could not connect its endpoints",
        "NVSHMEM_DEBUG",
        "infiniband",
    ),
    # charmrun's remote shell exiting 1 (rsh, or ssh's command failing) on a host (charmplusplus/charm
    # charmrun.C)
    "charmrun-remote-shell-exit-1": (
        "Charmrun> Error 1 returned from remote shell (gpu-node-2:1)",
        "charmrun could not start the program on a host through its remote shell",
        "charmrun ++verbose",
        "other",
    ),
    # MS-MPI's mpiexec and smpd with the peer refusing its port (microsoft/Microsoft-MPI smpd)
    "msmpi-smpd-refused-10061": (
        "Aborting: mpiexec on HEADNODE is unable to connect to the smpd service on compute-3:8677\n"
        "Other MPI error, error stack:\n"
        "connect failed - No connection could be made because the target machine actively refused it.  "
        "(errno 10061)",
        "MS-MPI could not reach the smpd service",
        "MsMpiLaunchSvc",
        "other",
    ),
    # PaddlePaddle's fluid gRPC client on a prefetch to a pserver whose channel never connected (gRPC core's
    # UNAVAILABLE detail ``Connect Failed``; PaddlePaddle/Paddle operators/distributed/grpc_client.cc)
    "paddle-grpc-prefetch-connect-failed": (
        "E1102 10:01:02.000123    77 grpc_client.cc:404] Prefetch var: name:[emb@GRAD] ep:[10.1.1.5:6174] "
        "grpc error:Connect Failed",
        "could not connect to a parameter server (pserver) endpoint",
        "PADDLE_PSERVERS_IP_PORT_LIST",
        "other",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # HPE MPT on a rank that called MPI_Abort (HPE MPT user guide's error messages)
    "mpt-rank-aborting": (
        "MPT ERROR: Rank 12(g:12) is aborting with error code 2.",
        "Rank 12 on worker-0 aborted (exit 2): it called MPI_Abort, and MPT ended the job",
        "MPI_CHECK_ARGS",
        "other",
    ),
    # Charm++'s CmiAbort on a job with partitions, the program's own reason (charmplusplus/charm
    # src/conv-core, CmiAbort's banner)
    "charm-partition-cmiabort": (
        "------- Partition 0 Processor 5 Exiting: Called CmiAbort ------\nReason: Could not open file in.dat",
        "Charm++'s CmiAbort ended its processor (Could not open file in.dat)",
        "+bt_gdb",
        "other",
    ),
}

_GPU_ERROR: dict[str, Wording] = {
    # the amdgpu driver's page fault with retry on a GFX9 hub (Linux drivers/gpu/drm/amd/amdgpu gmc_v9_0.c)
    "amdgpu-retry-page-fault": (
        "amdgpu 0000:03:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:8 pasid:32774, for "
        "process python3 pid 4113 thread python3 pid 4113)",
        "the amdgpu driver reported a GPU page fault",
        "AMD_SERIALIZE_KERNEL",
        "linux",
    ),
    # the amdgpu scheduler's timeout on a compute ring, as newer kernels print it (amdgpu_job.c)
    "amdgpu-compute-ring-timeout": (
        "amdgpu 0000:c1:00.0: amdgpu: ring comp_1.2.0 timeout, signaled seq=35, emitted seq=37",
        "never finished (a hung GPU) and reset the GPU",
        "rocm-smi",
        "linux",
    ),
    # Level Zero through SYCL's Unified Runtime adapter (intel/llvm, its UR exceptions)
    "level-zero-device-lost": (
        "RuntimeError: level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
        "the Intel GPU was lost",
        "xpu-smi",
        "pytorch",
    ),
    # CANN's runtime on an AI core fault, its chip/die form (CANN device_error_proc's report)
    "cann-aicore-error": (
        "The error from device(chipId:1, dieId:0), serial number is 42, there is an aicore error, core id "
        "is 12, error code = 0x800000",
        "an Ascend NPU's AI core faulted running a kernel",
        "ASCEND_GLOBAL_LOG_LEVEL",
        "other",
    ),
}

_GPU_OOM: dict[str, Wording] = {
    # PyTorch's MPS allocator in GiB, as newer releases print it (pytorch/pytorch aten/src/ATen/mps
    # MPSAllocator.mm)
    "mps-out-of-memory-gib": (
        "torch.OutOfMemoryError: MPS backend out of memory (MPS allocated: 18.02 GiB, other allocations: "
        "112.00 KiB, max allowed: 18.13 GiB). Tried to allocate 256.00 MiB on private pool.",
        "PyTorch's MPS backend on Apple silicon",
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO",
        "pytorch",
    ),
    # XLA's ROCm stream executor relaying HIP's status (openxla/xla stream_executor/rocm/rocm_driver.cc)
    "xla-rocm-hip-error-outofmemory": (
        "E0412 08:00:01.000123  4242 rocm_driver.cc:1213] failed to allocate 512.00MiB (536870912 bytes) "
        "from device: HIP_ERROR_OutOfMemory",
        "ROCm: HIP out of memory",
        "batch size",
        "jax",
    ),
}

_OOM: dict[str, Wording] = {
    # Moab's resource-limit policy on swap (Moab's RESOURCELIMITPOLICY: MEM, SWAP)
    "moab-swap-hard-limit": (
        "job 88231 exceeded SWAP usage hard limit (8192 > 4096)",
        "Moab (TORQUE's scheduler) killed the job",
        "checkjob -v",
        "linux",
    ),
    # systemd-oomd's kill of a cgroup under pressure, in systemd 250's wording (systemd/systemd oomd.c)
    "systemd-oomd-killed-scope": (
        "Jan 12 08:01:44 node3 systemd-oomd[612]: Killed /user.slice/user-1000.slice/user@1000.service/"
        "app.slice/trainer.scope due to memory pressure for /user.slice/user-1000.slice/user@1000.service "
        "being 71.02% > 50.00% for > 20s with reclaim activity",
        "systemd-oomd killed cgroup /user.slice/",
        "oomctl",
        "linux",
    ),
}

_DISK_FULL: dict[str, Wording] = {
    # the kubelet's own log on its image GC failing again, structured, in the older wording
    # (kubernetes/kubernetes pkg/kubelet/kubelet.go, images/image_gc_manager.go)
    "kubelet-image-gc-failed-in-a-row": (
        'E0412 08:00:01.123456    1987 kubelet.go:1347] "Image garbage collection failed multiple times in '
        'a row" err="failed to garbage collect required amount of images. Wanted to free 5242880000 bytes, '
        'but freed 0 bytes"',
        "image garbage collection found too few unused images",
        "--image-gc-high-threshold",
        "kubernetes",
    ),
}

_QUOTA: dict[str, Wording] = {
    # the quota admission refusing a pod it cannot count, as newer API servers print the resource
    # (kubernetes/kubernetes plugin/pkg/admission/resourcequota)
    "quota-admission-error-enforcing": (
        'Error creating: pods "mnist-worker-0" is forbidden: unable to CREATE /v1, Resource=pods at this time '
        "because there was an error enforcing quota",
        "the quota admission could not evaluate the namespace's ResourceQuota",
        "describe resourcequota",
        "kubernetes",
    ),
    # a quota the controller has not counted yet (its status unknown to the admission)
    "quota-status-unknown": (
        'Error creating: pods "mnist-launcher" is forbidden: status unknown for quota: compute-resources, '
        "resources: pods",
        "ResourceQuota compute-resources",
        "kube-controller-manager",
        "kubernetes",
    ),
    # Gatekeeper before v3.4, its ``[denied by …]`` bracket (open-policy-agent/gatekeeper)
    "gatekeeper-denied-by": (
        'Error from server (Forbidden): error when creating "job.yaml": admission webhook '
        '"validation.gatekeeper.sh" denied the request: [denied by must-have-limits] container <trainer> '
        "has no resource limits",
        "Gatekeeper's constraint must-have-limits forbids it",
        "kubectl get constraints",
        "kubernetes",
    ),
}

_SEGFAULT: dict[str, Wording] = {
    # R's handler on SIGBUS (wch1/r-source src/main/main.c, sigactionSegv)
    "r-caught-bus-error": (
        " *** caught bus error ***\naddress 0x7f3a1c000000, cause 'non-existent physical address'",
        "a bus error (SIGBUS) in R's process",
        "R -d gdb",
        "other",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "mpi-comm": _MPI_COMM,
            "mpi-abort": _MPI_ABORT,
            "gpu-error": _GPU_ERROR,
            "gpu-oom": _GPU_OOM,
            "oom": _OOM,
            "disk-full": _DISK_FULL,
            "quota": _QUOTA,
            "segfault": _SEGFAULT,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


def test_a_charm_abort_its_machine_layer_explains_is_the_transports() -> None:
    """CmiAbort whose reason a libfabric call wrote is the communication failure's, not a rank's abort."""
    text = "------- Partition 0 Processor 2 Exiting: Called CmiAbort ------\nReason: OFI::LrtsAdvanceCommunication::fi_cq_read error"
    fires_saying(text, "mpi-comm", "Charm++", "FI_LOG_LEVEL", stack="libfabric")


def test_mpichs_error_stack_keeps_its_own_words_over_a_librarys_call_that_failed() -> None:
    """MPICH's ``OFI fi_domain failed (…)`` is its error stack's, which says more than the bare call."""
    text = (
        "Abort(1091215): Fatal error in internal_Init: Other MPI error, error stack:\n"
        "MPIDI_OFI_init_local(611): OFI fi_domain failed (ofi_init.c:611:MPIDI_OFI_init_local:No data available)"
    )
    finding = fires_saying(text, "mpi-comm", "fi_domain", "", stack="mpich")
    assert "GASNet" not in finding.root_cause


# a family's words named, not reported: advice, a timeout recovered in place, a warning, a first attempt
_QUIET: dict[str, tuple[str, str]] = {
    "charmrun-advice": (
        "If you see `Charmrun> Error 255 returned from remote shell`, check that ssh to the nodes works.",
        "other",
    ),
    "amdgpu-soft-recovered": (
        "amdgpu 0000:c1:00.0: amdgpu: ring comp_1.0.0 timeout, but soft recovered",
        "linux",
    ),
    "kubelet-image-gc-first-attempt": (
        'E0412 08:00:01.123456    1987 kubelet.go:1339] "Image garbage collection failed once. Stats '
        'initialization may not have completed yet" err="failed to get imageFs info: unable to find data in '
        'memory cache"',
        "kubernetes",
    ),
    "gatekeeper-warn-action": (
        "Warning: [userpodlimits] container <trainer> has no cpu limit",
        "kubernetes",
    ),
    "mps-watermark-advice": (
        "Set PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable the upper limit for memory allocations on MPS.",
        "pytorch",
    ),
    "sos-provider-warning-alone": (
        "[0000] WARN:  transport_ofi.c:1604: query_for_fabric\n"
        "[0000]        OFI transport did not find any valid fabric services (provider=verbs)",
        "libfabric",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
