"""Rule ``gpu-error``: the GPU, or a kernel running on it, failed.

Read from the failed container's log tail (a rank's output reaches the launcher under
mpirun): CUDA's illegal memory access, misaligned address, illegal instruction and
unspecified launch failure; a device-side assert; uncorrectable ECC and NVLink errors; the
driver's Xid events (``NVRM: Xid (PCI:…): 79``) and a GPU that fell off the bus. NCCL's
watchdog re-raises such an error ("watchdog thread terminated with exception: CUDA error:
an illegal memory access"): that is this error, not a communication failure.

Errors of the hardware (ECC, NVLink, Xid 48/63/64/74/79/9x, fallen off the bus) name the
node and say to take it out of service; errors of a kernel (illegal access, device-side
assert) say how to find the bug. Running out of GPU memory is ``gpu-oom``.
"""

from __future__ import annotations

from consumers.rules.facts import other_workers, pods_with_hits
from consumers.rules.rule import Context, Detection, Rule, log_facts, pod_fact
from consumers.rules.signatures import GPU_ERRORS, Hit, gpu_error_words, gpu_errors
from consumers.rules.state import PodState, RunState
from consumers.rules.wording import also, rank_subject


def node_of(state: RunState, pod: PodState, rank: int | None) -> str | None:
    """The node a log line's process ran on: the pod's own, or for a rank in the launcher's
    log the node of the worker its slot maps to."""
    if pod.role != "launcher":
        return pod.node
    slots = state.job.spec.slots_per_worker if state.job is not None else None
    if rank is None or not slots:
        return None
    return next((w.node for w in state.workers() if w.index == rank // slots), None)


def _most_telling(hits: tuple[Hit, ...]) -> Hit:
    order = {signature.name: i for i, signature in enumerate(GPU_ERRORS)}
    return min(hits, key=lambda h: order.get(h.name, len(order)))


def _detect_gpu_error(state: RunState, ctx: Context) -> Detection | None:
    found = pods_with_hits(state, gpu_errors)
    if not found:
        return None
    pod, hits = found[0]
    hit = _most_telling(hits)
    words, hardware = gpu_error_words(hit)
    subject = rank_subject(state, pod, hit.rank)
    node = node_of(state, pod, hit.rank)
    others = other_workers(found)
    evidence = [e for p, h in found for e in log_facts(p, dict.fromkeys(x.line for x in h[:6]))]
    if hardware:
        where = f"node {node}" if node else "its node"
        sentence = f"{subject} failed: GPU hardware error on {where} — {words}{also(others)}"
        if node:
            evidence.append(pod_fact(pod, "spec.nodeName", node))
        remediation = tuple(step.replace("<node>", node or "<node>") for step in _HARDWARE_STEPS)
    else:
        sentence = f"{subject} failed: {words}{also(others)}"
        remediation = _KERNEL_STEPS
    own = _OWN_STEPS.get(hit.name)
    remediation = (own, *remediation) if own else remediation
    return Detection(
        root_cause=sentence,
        evidence=tuple(evidence),
        key=(hit.name, hit.group("previous") or hit.group("xid") or "", *(p.uid for p, _ in found)),
        remediation=remediation,
    )


_HARDWARE_STEPS = (
    "Take the node out of service and report it to the cluster admins: kubectl cordon <node>; "
    "they can check it with nvidia-smi -q -d ECC,ROW_REMAPPER and dcgmi diag -r 3.",
    "Resubmit the job (from its last checkpoint); with the node cordoned it lands elsewhere.",
    "See what else the node reported: kubectl describe node <node> (Conditions, Events).",
)
_KERNEL_STEPS = (
    "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error is raised at the kernel that caused it; "
    "compute-sanitizer finds the offending access.",
    "For a device-side assert, check indices and labels are in range (class labels < number of "
    "classes, embedding ids < vocabulary size): on CPU the same code raises a readable error.",
    "If the error moves between nodes or comes with Xid or ECC messages, suspect the hardware: "
    "kubectl -n {namespace} get pods -o wide | grep {job} shows the nodes.",
)

_OWN_STEPS: dict[str, str] = {
    "cudnn-execution": "cuDNN: rerun with CUDA_LAUNCH_BLOCKING=1 so the kernel that failed is the one that "
    "reports (an earlier kernel's fault often surfaces at the next cuDNN call), and try without the "
    "autotuned algorithm (torch.backends.cudnn.benchmark=False, TF_CUDNN_USE_AUTOTUNE=0); check that the "
    "cuDNN the program loads matches its CUDA and the node's driver.",
    "no-accelerator": "No accelerator visible: check the pod asked for one (amd.com/gpu, habana.ai/gaudi "
    "in its limits) and got it (rocm-smi / hl-smi in the pod), that HIP_VISIBLE_DEVICES / "
    "HABANA_VISIBLE_DEVICES is not empty or wrong, and that the node's driver sees the device (dmesg on "
    "the node).",
    "driver-too-old": "Driver: nvidia-smi on the node shows the driver's CUDA version; run an image built "
    "for a CUDA no newer than that (or with the CUDA forward-compatibility package), or move the job to a "
    "node pool with a newer driver.",
    "no-kernel-image": "Architecture: the build's targets (TORCH_CUDA_ARCH_LIST / PYTORCH_ROCM_ARCH, nvcc's "
    "-gencode, a wheel's CUDA or ROCm variant) must include this GPU's (nvidia-smi --query-gpu=compute_cap, "
    "rocminfo | grep gfx); rebuild the extension or install the wheel made for it.",
    "cublas-execution": "cuBLAS: rerun with CUDA_LAUNCH_BLOCKING=1 so the kernel that failed reports at its "
    "own call (an earlier kernel's fault often surfaces at the next cuBLAS call); check the shapes and "
    "leading dimensions (lda, ldb, ldc) the GEMM is given, and that the cuBLAS the program loads was built "
    "for this GPU's architecture and the driver's CUDA version.",
    "amdgpu-page-fault": "AMD GPU: rerun with AMD_SERIALIZE_KERNEL=3 and HIP_LAUNCH_BLOCKING=1 so the "
    "faulting kernel is the one that reports it; the fault's address and process (dmesg | grep amdgpu on "
    "the node) name the buffer, and a kernel built for another gfx target (HSA_OVERRIDE_GFX_VERSION) "
    "faults this way too.",
    "amdgpu-ring-timeout": "AMD GPU: the driver reset the GPU after a job hung on its ring (dmesg | grep "
    "amdgpu on the node shows the ring and the process); rerun with AMD_SERIALIZE_KERNEL=3 to find the "
    "kernel, check rocm-smi for the GPU's state, and if it recurs on the node whatever runs, cordon it.",
    "xpu-device-lost": "Intel GPU: check the node's kernel log for the i915 / xe driver's GPU hang and "
    "reset (dmesg | grep -iE 'i915|xe.*(hang|reset)') and the GPU's health with xpu-smi diag -d <id>; "
    "ZE_ENABLE_VALIDATION_LAYER=1 finds a kernel that hangs it.",
    "no-driver": "NVIDIA driver: on the node, lsmod | grep nvidia and dmesg | grep -i nvrm show whether "
    "the module loaded (a kernel updated without it, Secure Boot refusing it); in the pod, check the "
    "NVIDIA device plugin or GPU operator gave it the GPU (nvidia.com/gpu in its limits) and the driver's "
    "libraries.",
    "rocm-queue-abort": "AMD GPU: rerun with AMD_SERIALIZE_KERNEL=3 and HIP_LAUNCH_BLOCKING=1 so the "
    "kernel that faulted is the one that reports it; check the build targets the GPU's gfx version "
    "(rocminfo | grep gfx against the wheel's or PYTORCH_ROCM_ARCH, no HSA_OVERRIDE_GFX_VERSION), and "
    "dmesg | grep amdgpu on the node for a fault or a reset.",
    "tpu-core-halted": "TPU: the HLO the error names (its fusion, its computation) is where the core "
    "stopped; rerun with the program's shapes and dtypes checked on CPU, a newer libtpu / jax / torch_xla, "
    "and if it recurs on one TPU VM whatever runs, recreate it (gcloud compute tpus tpu-vm).",
    "no-device": "No GPU visible: check the pod asked for one (nvidia.com/gpu or amd.com/gpu in its "
    "limits) and got it (kubectl -n {namespace} exec <pod> -- nvidia-smi -L), that CUDA_VISIBLE_DEVICES "
    "(HIP_VISIBLE_DEVICES) is not empty or wrong, and that the node's driver sees the GPU (nvidia-smi on the "
    "node; dmesg for an Xid or a GPU fallen off the bus).",
    "devices-unavailable": "GPU busy or unavailable: nvidia-smi -q -d COMPUTE on the node shows its compute "
    "mode (Exclusive_Process lets one process hold it) and nvidia-smi the processes on it; two containers "
    "given the same GPU, or a leftover process, hold it. If none does, the GPU is in a failed state: cordon "
    "the node.",
    "cuda-unknown": "cudaErrorUnknown: look for an Xid or a GPU fallen off the bus on the node at that time "
    "(dmesg | grep -i nvrm, kubectl describe node <node>); if the node shows one, cordon it.",
    "launch-timeout": "Kernel watchdog: a GPU that also drives a display kills kernels after a few "
    "seconds; on a compute GPU the kernel hung. Rerun with CUDA_LAUNCH_BLOCKING=1 to name it, and check its "
    "loop bounds.",
    "invalid-configuration": "Launch configuration: rerun with CUDA_LAUNCH_BLOCKING=1 so the kernel that "
    "failed reports at its own launch; its block size, dynamic shared memory or grid must fit the GPU's "
    "limits (maxThreadsPerBlock, sharedMemPerBlock, maxGridSize in deviceQuery), so check the input shape or "
    "batch that sized it, or a build of the library for this GPU.",
    "hardware-stack": "Kernel stack: a kernel's recursion or large local arrays overflow its stack; raise "
    "it (cudaDeviceSetLimit(cudaLimitStackSize, …)) or move the arrays to shared or global memory, and run "
    "compute-sanitizer to find the kernel.",
    "ascend-core-error": "Ascend NPU: the error's operator and its dump (ASCEND_GLOBAL_LOG_LEVEL=1, "
    "plog under ~/ascend/log) name the kernel; build it for this chip (its SoC version, e.g. Ascend310P "
    "vs 910B) and check its inputs are aligned as the core needs (UB addresses).",
}
"""The first step for a GPU error of a stack other than CUDA's, in that stack's tools."""


GPU_ERROR = Rule(
    id="gpu-error",
    kind="cause",
    severity="critical",
    summary="The GPU or a GPU kernel failed: illegal memory access, device-side assert, ECC or "
    "NVLink error, an Xid event, a GPU fallen off the bus.",
    remediation=_KERNEL_STEPS,
    detect=_detect_gpu_error,
)
