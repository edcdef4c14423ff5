"""The failures the libraries print, read from their own message catalogs rather than from texts seen.

Each table is one library's catalog: the message as the library formats it (its log prefix, its error's
name and its text), from the library's source file named above the table, and the rule its failure
belongs to: CUDA's runtime and driver errors (memory exhaustion ``gpu-oom``, device faults ``gpu-error``),
the CUDA math libraries' allocation failures, HIP's, ROCr's and MIOpen's, NCCL's WARN lines and results,
RCCL's, Open MPI's error classes and help texts, MPICH's error stack, Hydra's, MVAPICH's, UCX's status strings, libfabric's, PMIx's, Gloo's, torch.distributed's, Horovod's,
the kernel's OOM killer across versions, the C library's signal words as shells and runtimes print them,
each C library's and runtime's ENOSPC / EDQUOT, and the Kubernetes Events for evictions, OOM kills, quotas
and LimitRanges. A row's sentence and remediation are its library's (what the finding says, a step it
gives). The near-misses come from the same catalogs: INFO lines, retries, warnings the run goes on
after, advice naming a failure.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, catalog_rows, fires_saying, stays_quiet
from tests.rules.corpus_score import TEXT_RULES

# id: (rule, (text, what the root cause says, what a step of the remediation says, the replay's stack))

# the CUDA runtime's cudaGetErrorString texts (CUDA include/driver_types.h, the cudaError enum and its
# comments) as PyTorch raises them, and cuda-samples' checkCudaErrors (Common/helper_cuda.h) with the
# error's name
_CUDA_RUNTIME: dict[str, tuple[RuleId, Wording]] = {
    "helper-cuda-memory-allocation": (
        "gpu-oom",
        (
            'CUDA error at train.cu:118 code=2(cudaErrorMemoryAllocation) "cudaMalloc(&d_buf, bytes)"',
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "cuda",
        ),
    ),
    "helper-cuda-illegal-address": (
        "gpu-error",
        (
            'CUDA error at kernels.cu:77 code=700(cudaErrorIllegalAddress) "cudaDeviceSynchronize()"',
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "cuda",
        ),
    ),
    "helper-cuda-misaligned-address": (
        "gpu-error",
        (
            (
                "CUDA error at reduce.cu:212 code=716(cudaErrorMisalignedAddress) "
                '"cudaStreamSynchronize(stream)"'
            ),
            "a GPU kernel made a misaligned memory access (a bug in a",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "cuda",
        ),
    ),
    "runtime-illegal-instruction": (
        "gpu-error",
        (
            (
                "RuntimeError: CUDA error: an illegal instruction was encountered\nCUDA kernel "
                "errors might be asynchronously reported at some other API call, so the "
                "stacktrace below might be incorrect."
            ),
            "a GPU kernel executed an illegal instruction (a kernel",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "runtime-hardware-stack-error": (
        "gpu-error",
        (
            (
                "RuntimeError: CUDA error: hardware stack error\nCompile with "
                "`TORCH_USE_CUDA_DSA` to enable device-side assertions."
            ),
            "a GPU kernel's call stack failed (hardware stack error",
            "Kernel stack: a kernel's recursion or large",
            "pytorch",
        ),
    ),
    "runtime-unspecified-launch-failure": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: unspecified launch failure",
            "a GPU kernel crashed (unspecified launch failure)",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "runtime-uncorrectable-ecc": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: uncorrectable ECC error encountered",
            "GPU hardware error on node gpu-node-0 — uncorrectable ECC",
            "Take the node out of service and report it to",
            "pytorch",
        ),
    ),
    "runtime-nvlink-uncorrectable": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: uncorrectable NVLink error was detected during the execution",
            "GPU hardware error on node gpu-node-0 — uncorrectable",
            "Take the node out of service and report it to",
            "pytorch",
        ),
    ),
    "runtime-launch-timeout": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: the launch timed out and was terminated",
            "a GPU kernel ran longer than the driver's watchdog allows",
            "Kernel watchdog: a GPU that also drives a",
            "pytorch",
        ),
    ),
    "runtime-invalid-pc": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: invalid program counter",
            "a GPU kernel jumped to an invalid program counter (a",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "runtime-devices-unavailable": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            "the GPU was busy or unavailable: another process holds it",
            "GPU busy or unavailable: nvidia-smi -q -d",
            "pytorch",
        ),
    ),
    "runtime-no-device": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: no CUDA-capable device is detected",
            "the process saw no usable GPU (no CUDA-capable device): the",
            "No GPU visible: check the pod asked for one",
            "pytorch",
        ),
    ),
    "runtime-unknown-error": (
        "gpu-error",
        (
            (
                "RuntimeError: CUDA error: unknown error\nCUDA kernel errors might be "
                "asynchronously reported at some other API call, so the stacktrace below might "
                "be incorrect."
            ),
            "the CUDA driver returned an unknown error",
            "cudaErrorUnknown: look for an Xid or a GPU",
            "pytorch",
        ),
    ),
    "runtime-invalid-address-space": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: operation not supported on global/shared address space",
            "a GPU kernel used an address in a memory space the",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
}

# the CUDA driver's CUresult names (CUDA include/cuda.h, cuGetErrorName) as bindings raise them: CuPy
# cupy_backends/cuda/api/driver.pyx and runtime.pyx, cupy/cuda/memory.pyx; Numba
# numba/cuda/cudadrv/driver.py; XLA xla/pjrt/pjrt_stream_executor_client.cc; TensorFlow
# tensorflow/core/common_runtime/bfc_allocator.cc
_CUDA_DRIVER: dict[str, tuple[RuleId, Wording]] = {
    "cupy-driver-out-of-memory": (
        "gpu-oom",
        (
            "cupy_backends.cuda.api.driver.CUDADriverError: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "cuda",
        ),
    ),
    "numba-cumemalloc-out-of-memory": (
        "gpu-oom",
        (
            (
                "numba.cuda.cudadrv.driver.CudaAPIError: [2] Call to cuMemAlloc results in "
                "CUDA_ERROR_OUT_OF_MEMORY"
            ),
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "cuda",
        ),
    ),
    "numba-illegal-address": (
        "gpu-error",
        (
            (
                "numba.cuda.cudadrv.driver.CudaAPIError: [700] Call to cuCtxSynchronize results "
                "in CUDA_ERROR_ILLEGAL_ADDRESS"
            ),
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "cuda",
        ),
    ),
    "cupy-runtime-illegal-address": (
        "gpu-error",
        (
            (
                "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorIllegalAddress: an "
                "illegal memory access was encountered"
            ),
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "cuda",
        ),
    ),
    "cupy-runtime-memory-allocation": (
        "gpu-oom",
        (
            "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorMemoryAllocation: out of memory",
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "cuda",
        ),
    ),
    "cupy-pool-out-of-memory": (
        "gpu-oom",
        (
            (
                "cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 4,294,967,296 bytes "
                "(allocated so far: 75,161,927,680 bytes)."
            ),
            "GPU out of memory (CuPy's memory pool could not allocate",
            "CuPy: its memory pool keeps the blocks it freed",
            "cuda",
        ),
    ),
    "xla-driver-ecc": (
        "gpu-error",
        (
            (
                "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: CUDA error: : "
                "CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered"
            ),
            "GPU hardware error on node gpu-node-0 — uncorrectable ECC",
            "Take the node out of service and report it to",
            "jax",
        ),
    ),
    "xla-driver-launch-failed": (
        "gpu-error",
        (
            (
                "E1129 08:01:02.123456 12345 pjrt_stream_executor_client.cc:2809] Execution of "
                "replica 0 failed: INTERNAL: Failed to launch CUDA kernel: fusion_12 with block "
                "dimensions: 128x1x1: CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure"
            ),
            "a GPU kernel crashed (unspecified launch failure)",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "jax",
        ),
    ),
    "xla-resource-exhausted": (
        "gpu-oom",
        (
            (
                "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                "trying to allocate 17179869184 bytes."
            ),
            "GPU out of memory (JAX/XLA: RESOURCE_EXHAUSTED)",
            "Lower the per-GPU batch size, or use gradient",
            "jax",
        ),
    ),
    "tf-bfc-oom": (
        "gpu-oom",
        (
            (
                "2026-11-29 08:01:02.123456: W tensorflow/core/common_runtime/bfc_allocator.cc:47"
                "9] Allocator (GPU_0_bfc) ran out of memory trying to allocate 8.00GiB (rounded "
                "to 8589934592)requested by op MatMul\ntensorflow.python.framework.errors_impl.Res"
                "ourceExhaustedError: OOM when allocating tensor with shape[65536,32768] and "
                "type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
                "GPU_0_bfc"
            ),
            "GPU out of memory (XLA / TensorFlow's BFC allocator)",
            "Lower the per-GPU batch size, or use gradient",
            "tensorflow",
        ),
    ),
}

# the CUDA math libraries' status names for an allocation that failed: cuFFT include/cufft.h (cufftResult),
# cuSOLVER cusolver_common.h, cuSPARSE cusparse.h, cuBLAS cublas_api.h, cuDNN cudnn.h (cudnnStatus_t), as
# PyTorch raises them (aten/src/ATen/cuda/Exceptions.h); NCCL src/include/checks.h (CUDACHECK's Cuda
# failure) under ncclUnhandledCudaError
_CUDA_LIBRARIES: dict[str, tuple[RuleId, Wording]] = {
    "cufft-alloc-failed": (
        "gpu-oom",
        (
            "RuntimeError: cuFFT error: CUFFT_ALLOC_FAILED",
            "GPU out of memory (a CUDA math library, cuFFT / cuSOLVER /",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    "cusolver-alloc-failed": (
        "gpu-oom",
        (
            (
                "RuntimeError: cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling "
                "`cusolverDnCreate(handle)`"
            ),
            "GPU out of memory (a CUDA math library, cuFFT / cuSOLVER /",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    "cusparse-alloc-failed": (
        "gpu-oom",
        (
            "RuntimeError: CUDA error: CUSPARSE_STATUS_ALLOC_FAILED when calling `cusparseCreate(handle)`",
            "GPU out of memory (a CUDA math library, cuFFT / cuSOLVER /",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    "cublas-alloc-failed": (
        "gpu-oom",
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "GPU out of memory (cuBLAS could not allocate its workspace)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    "cudnn-alloc-failed": (
        "gpu-oom",
        (
            "RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED",
            "GPU out of memory (cuDNN could not allocate its workspace)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    "nccl-unhandled-cuda-oom": (
        "gpu-oom",
        (
            (
                "torch.distributed.DistBackendError: NCCL error in: "
                "../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error (run "
                "with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\nncclUnhandledCudaError: "
                "Call to CUDA function failed.\nLast error:\nCuda failure 'out of memory'"
            ),
            "GPU out of memory (NCCL could not allocate its buffers)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
}

# HIP include/hip/hip_runtime_api.h (hipError_t, hipGetErrorString) as PyTorch raises it; ROCclr
# device/rocm/rocdevice.cpp (a queue's error callback); ROCr runtime/hsa-runtime/core/runtime/runtime.cpp
# (its memory access fault) and inc/hsa.h (hsa_status_t)
_HIP: dict[str, tuple[RuleId, Wording]] = {
    "torch-hip-out-of-memory": (
        "gpu-oom",
        (
            (
                "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                "has a total capacity of 191.98 GiB of which 1.02 GiB is free."
            ),
            "GPU out of memory (ROCm: HIP out of memory)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    "torch-hip-illegal-address": (
        "gpu-error",
        (
            (
                "RuntimeError: HIP error: an illegal memory access was encountered\nHIP kernel "
                "errors might be asynchronously reported at some other API call, so the "
                "stacktrace below might be incorrect."
            ),
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "hip-check-out-of-memory": (
        "gpu-oom",
        (
            "HIP error: hipErrorOutOfMemory (out of memory) at gemm.cpp:88",
            "GPU out of memory (ROCm: HIP out of memory)",
            "Lower the per-GPU batch size, or use gradient",
            "other",
        ),
    ),
    "rocr-memory-access-fault": (
        "gpu-error",
        (
            (
                "Memory access fault by GPU node-2 (Agent handle: 0x55d0c0f0a0b0) on address "
                "0x7f3c00000000. Reason: Page not present or supervisor privilege."
            ),
            "a GPU kernel accessed memory it does not own (ROCm's memory",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "other",
        ),
    ),
    "rocr-hsa-exception": (
        "gpu-error",
        (
            (
                ":0:rocdevice.cpp            :2875: 1234567890 us: [pid:4711 tid:0x7f00aa] "
                "Callback: Queue 0x7f00bb000000 aborting with error : "
                "HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware "
                "exception. code: 0x1016"
            ),
            "the GPU raised a hardware exception (ROCm's runtime: a GPU",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "other",
        ),
    ),
    "rocr-memory-aperture": (
        "gpu-error",
        (
            (
                ":0:rocdevice.cpp            :2875: 1234567890 us: [pid:4711 tid:0x7f00aa] "
                "Callback: Queue 0x7f00bb000000 aborting with error : "
                "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access "
                "memory beyond the largest legal address. code: 0x29"
            ),
            "a GPU kernel accessed memory it does not own (ROCm's memory",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "other",
        ),
    ),
    "hip-illegal-address-name": (
        "gpu-error",
        (
            "HIP error: hipErrorIllegalAddress (an illegal memory access was encountered) at kernel.hip:55",
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "other",
        ),
    ),
    "hip-launch-failure": (
        "gpu-error",
        (
            "RuntimeError: HIP error: unspecified launch failure",
            "a GPU kernel crashed (unspecified launch failure)",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "miopen-alloc-failed": (
        "gpu-oom",
        (
            "MIOpen(HIP): Error [Allocate] miopenStatusAllocFailed\nRuntimeError: miopenStatusAllocFailed",
            "GPU out of memory (MIOpen could not allocate its workspace)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
}

# NCCL src/init.cc (ncclGetErrorString), src/include/debug.h (WARN's host:pid:tid [dev] prefix),
# src/misc/socket.cc, src/transport/net_ib.cc, src/transport/shm.cc, src/proxy.cc, src/bootstrap.cc; PyTorch
# torch/csrc/distributed/c10d/NCCLUtils.hpp (its wrapper of the result)
_NCCL: dict[str, tuple[RuleId, Wording]] = {
    "torch-unhandled-system-error": (
        "mpi-comm",
        (
            (
                "torch.distributed.DistBackendError: NCCL error in: "
                "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system "
                "error (run with NCCL_DEBUG=INFO for details), NCCL version "
                "2.21.5\nncclSystemError: System call (e.g. socket, malloc) or external library "
                "call failed or device error. \nLast error:\nsocketPollConnect: Connect to "
                "10.0.0.2<41271> returned 113(No route to host) errno 115(Operation now in "
                "progress)"
            ),
            "NCCL could not reach another rank's address: the interface",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "torch-remote-error": (
        "mpi-comm",
        (
            (
                "torch.distributed.DistBackendError: NCCL error in: "
                "../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, remote process exited or "
                "there was a network error, NCCL version 2.20.5\nncclRemoteError: A call failed "
                "possibly due to a network error or a remote process exiting prematurely.\nLast "
                "error:\nNET/IB : Got completion from peer 10.0.0.3<51234> with status=12 "
                "opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.2 remoteGidsfe80::1"
            ),
            "the peer or the link went away (status 12: transport retry",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "pytorch",
        ),
    ),
    "warn-ib-completion": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4790 [3] NCCL WARN NET/IB : Got completion from peer "
                "10.0.0.3<51234> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid "
                "::ffff:10.0.0.2 remoteGids::ffff:10.0.0.3 hca mlx5_0"
            ),
            "the peer or the link went away (status 12: transport retry",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "pytorch",
        ),
    ),
    "warn-socket-recv-reset": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4790 [0] NCCL WARN socketProgressOpt: Call to recv from "
                "10.0.0.2<36045> failed : Connection reset by peer"
            ),
            "Connection reset by peer",
            "Check that NetworkPolicies in team-a allow all",
            "pytorch",
        ),
    ),
    "warn-net-connection-closed": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4790 [0] NCCL WARN Net : Connection closed by remote peer 10.0.0.3<57836>",
            "connection closed by remote peer",
            "Check that NetworkPolicies in team-a allow all",
            "pytorch",
        ),
    ),
    "warn-ibv-reg-mr": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4790 [2] NCCL WARN NET/IB : Call to ibv_reg_mr failed with "
                "error Cannot allocate memory"
            ),
            "could not allocate or register memory for its transport",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-shm-extend": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4790 [1] NCCL WARN Error: failed to extend /dev/shm/nccl-AbC123 "
                "to 9637892 bytes"
            ),
            "/dev/shm is too small for NCCL's shared-memory transport (a",
            "Mount a memory-backed emptyDir at /dev/shm in",
            "pytorch",
        ),
    ),
    "warn-cuda-failure-oom": (
        "gpu-oom",
        (
            "gpu-node-1:4711:4790 [1] NCCL WARN Cuda failure 'out of memory'",
            "GPU out of memory (NCCL could not allocate its buffers)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    "warn-cuda-failure-illegal": (
        "gpu-error",
        (
            "gpu-node-1:4711:4790 [1] NCCL WARN Cuda failure 'an illegal memory access was encountered'",
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "warn-proxy-service-error": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4799 [5] NCCL WARN [Service thread] Error encountered "
                "progressing operation=Connect, res=3, closing connection"
            ),
            "NCCL's proxy service thread closed a peer's connection",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-bootstrap-no-interface": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4711 [0] NCCL WARN Bootstrap : no socket interface found",
            "NCCL's bootstrap found no network interface to use",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-ib-async-event": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4801 [0] NCCL WARN NET/IB : mlx5_1:1 Got async event : port error",
            "an InfiniBand port went down under NCCL (its HCA reported a",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-proxy-failed-execute": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4799 [3] NCCL WARN [Proxy Service 3] Failed to execute "
                "operation Connect from rank 3, retcode 3"
            ),
            "NCCL's proxy service thread closed a peer's connection",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-ibv-create-qp": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4799 [3] NCCL WARN Call to ibv_create_qp failed with error "
                "Cannot allocate memory"
            ),
            "ibv_create_qp",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "pytorch",
        ),
    ),
    "warn-message-truncated": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4799 [3] NCCL WARN Message truncated : received 1024 bytes instead of 256",
            "NCCL received a longer message than it expected from a peer",
            "Check every rank runs the same image and NCCL",
            "pytorch",
        ),
    ),
    "warn-ib-open-device": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4711 [0] NCCL WARN NET/IB : Unable to open device mlx5_0",
            "NCCL's InfiniBand transport could not open an RDMA device",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-socket-connect-timeout": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4711 [0] NCCL WARN socketStartConnect: Connect to "
                "10.0.0.3<52311> failed : Connection timed out"
            ),
            "a connection or an exchange with another rank timed out",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-bootstrap-closed": (
        "mpi-comm",
        (
            (
                "gpu-node-1:4711:4711 [0] NCCL WARN Bootstrap : Connection closed by remote peer "
                "10.0.0.3<48123>"
            ),
            "lost a peer: the other side closed the connection or died",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "warn-rem-allocator": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4799 [3] NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 67)",
            "could not allocate or register memory for its transport",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    "torch-internal-no-interface": (
        "mpi-comm",
        (
            (
                "[rank0]: torch.distributed.DistBackendError: NCCL error in: "
                "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027, internal error - "
                "please report this issue to the NCCL developers, NCCL version 2.21.5\n[rank0]: "
                "ncclInternalError: Internal check failed.\n[rank0]: Last error:\n[rank0]: "
                "Bootstrap : no socket interface found"
            ),
            "NCCL's bootstrap found no network interface to use",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
}

# RCCL (ROCm's NCCL) src/include/checks.h (HIPCHECK's WARN), src/init.cc
_RCCL: dict[str, tuple[RuleId, Wording]] = {
    "warn-hip-failure": (
        "gpu-error",
        (
            "gpu-node-1:4711:4790 [1] NCCL WARN HIP failure 'an illegal memory access was encountered'",
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "torch-rccl-unhandled-system": (
        "mpi-comm",
        (
            (
                "RuntimeError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNC"
                "CL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for details), "
                "NCCL version 2.18.3\nncclSystemError: System call (e.g. socket, malloc) or "
                "external library call failed or device error.\nLast error:\nNET/IB : Unable to "
                "connect to peer: ibv_modify_qp failed with 110 Connection timed out"
            ),
            "a system call failed (ncclSystemError: sockets, shared",
            "Check that NetworkPolicies in team-a allow all",
            "pytorch",
        ),
    ),
}

# Open MPI ompi/errhandler/errhandler_predefined.c (the fatal handler's block), ompi/errhandler/errcode.c
# (the classes' strings, ULFM's among them); opal/mca/btl/tcp/help-mpi-btl-tcp.txt;
# orte/mca/errmgr/base/help-errmgr-base.txt and PRRTE's copy; ompi/mpi/help-mpi-api.txt;
# orte/tools/orterun/help-orterun.txt; opal/mca/btl/openib/help-mpi-btl-openib.txt; orte/mca/plm/base/help-
# plm-base.txt
_OPEN_MPI: dict[str, tuple[RuleId, Wording]] = {
    "err-proc-failed": (
        "mpi-comm",
        (
            (
                "[gpu-node-1:04711] *** An error occurred in MPI_Allreduce\n[gpu-node-1:04711] "
                "*** reported by process [1381302273,3]\n[gpu-node-1:04711] *** on communicator "
                "MPI_COMM_WORLD\n[gpu-node-1:04711] *** MPI_ERR_PROC_FAILED: Process "
                "Failure\n[gpu-node-1:04711] *** MPI_ERRORS_ARE_FATAL (processes in this "
                "communicator will now abort,\n[gpu-node-1:04711] ***    and potentially your MPI "
                "job)"
            ),
            "a process of the communicator failed (MPI_ERR_PROC_FAILED",
            "A process of the communicator failed first: the",
            "openmpi",
        ),
    ),
    "err-revoked": (
        "mpi-comm",
        (
            (
                "[gpu-node-1:04711] *** An error occurred in MPI_Allreduce\n[gpu-node-1:04711] "
                "*** reported by process [1381302273,3]\n[gpu-node-1:04711] *** on communicator "
                "MPI_COMM_WORLD\n[gpu-node-1:04711] *** MPI_ERR_REVOKED: Communication Object "
                "Revoked\n[gpu-node-1:04711] *** MPI_ERRORS_ARE_FATAL (processes in this "
                "communicator will now abort,\n[gpu-node-1:04711] ***    and potentially your MPI "
                "job)"
            ),
            "a process of the communicator failed (MPI_ERR_PROC_FAILED",
            "A process of the communicator failed first: the",
            "openmpi",
        ),
    ),
    "btl-tcp-connect-failed": (
        "mpi-comm",
        (
            (
                "--------------------------------------------------------------------------\nWARNI"
                "NG: Open MPI failed to TCP connect to a peer MPI process.  This\nshould not "
                "happen.\n\nYour Open MPI job may now hang or fail.\n\n  Local host: gpu-node-1\n  "
                "PID:        4711\n  Message:    connect() to 10.0.0.3:1024 failed\n  Error:      "
                "No route to host (113)\n---------------------------------------------------------"
                "-----------------"
            ),
            "another rank's host could not be reached (no route, an",
            "Open MPI: rerun with --mca plm_base_verbose 5",
            "openmpi",
        ),
    ),
    "errmgr-lost-daemon": (
        "mpi-comm",
        (
            (
                "--------------------------------------------------------------------------\nORTE "
                "has lost communication with a remote daemon.\n\n  HNP daemon   : [[45120,0],0] on "
                "node gpu-node-0\n  Remote daemon: [[45120,0],2] on node gpu-node-2\n\nThis is "
                "usually due to either a failure of the TCP network\nconnection to the node, or "
                "possibly an internal failure of\nthe daemon itself. We cannot recover from this "
                "failure, and\ntherefore will terminate the "
                "job.\n--------------------------------------------------------------------------"
            ),
            "workers unreachable: lost the MPI daemon on gpu-node-2",
            "Check that NetworkPolicies in team-a let the",
            "openmpi",
        ),
    ),
    "prte-lost-daemon": (
        "mpi-comm",
        (
            (
                "--------------------------------------------------------------------------\nPRTE "
                "has lost communication with a remote daemon.\n\n  HNP daemon   : "
                "[prterun-gpu-node-0-4711@0,0] on node gpu-node-0\n  Remote daemon: "
                "[prterun-gpu-node-0-4711@0,2] on node gpu-node-2\n\nThis is usually due to either "
                "a failure of the TCP network\nconnection to the node, or possibly an internal "
                "failure of\nthe daemon itself. We cannot recover from this failure, "
                "and\ntherefore will terminate the "
                "job.\n--------------------------------------------------------------------------"
            ),
            "workers unreachable: lost the MPI daemon on gpu-node-2",
            "Check that NetworkPolicies in team-a let the",
            "openmpi",
        ),
    ),
    "mpi-abort-invoked": (
        "mpi-abort",
        (
            (
                "--------------------------------------------------------------------------\nMPI_A"
                "BORT was invoked on rank 3 in communicator MPI_COMM_WORLD\nwith errorcode "
                "1.\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\nYou may "
                "or may not see output from other processes, depending on\nexactly when Open MPI "
                "kills them.\n--------------------------------------------------------------------"
                "------"
            ),
            "Rank 3 on worker-0 aborted (exit 1)",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "prterun-noticed-segv": (
        "segfault",
        (
            (
                "--------------------------------------------------------------------------\nprter"
                "un noticed that process rank 2 with PID 4711 on node gpu-node-2 exited "
                "on\nsignal 11 (Segmentation fault).\n---------------------------------------------"
                "-----------------------------"
            ),
            "Rank 2 on worker-2 crashed with a segmentation fault",
            "Read the backtrace after the signal in the log",
            "openmpi",
        ),
    ),
    "openib-retry-exceeded": (
        "mpi-comm",
        (
            (
                "--------------------------------------------------------------------------\nThe "
                'InfiniBand retry count between two MPI processes has been\nexceeded.  "Retry '
                'count" is defined in the InfiniBand spec 1.2\n(section '
                "12.7.38):\n----------------------------------------------------------------------"
                "----"
            ),
            "a connection or an exchange with another rank timed out",
            "Open MPI: rerun with --mca plm_base_verbose 5",
            "openmpi",
        ),
    ),
    "orted-unexpected-failure": (
        "mpi-comm",
        (
            (
                "--------------------------------------------------------------------------\nAn "
                "ORTE daemon has unexpectedly failed after launch and before\ncommunicating back "
                "to mpirun. This could be caused by a number\nof factors, including an inability "
                "to create a connection back\nto mpirun due to a lack of common network "
                "interfaces and/or no\nroute found between "
                "them.\n--------------------------------------------------------------------------"
            ),
            "an MPI daemon failed after launch, before it reached",
            "Check that NetworkPolicies in team-a let the",
            "openmpi",
        ),
    ),
    "oob-tcp-unable-complete": (
        "mpi-comm",
        (
            (
                "--------------------------------------------------------------------------\nA "
                "process or daemon was unable to complete a TCP connection\nto another process:\n  "
                "Local host:    gpu-node-1\n  Remote host:   gpu-node-2\nThis is usually caused by "
                "a firewall on the remote host. Please\ncheck that any firewall (e.g., iptables) "
                "has been disabled and\ntry again.\n-----------------------------------------------"
                "---------------------------"
            ),
            "Open MPI's TCP transport (btl_tcp) could not establish a",
            "Open MPI: rerun with --mca plm_base_verbose 5",
            "openmpi",
        ),
    ),
    "btl-tcp-readv-reset": (
        "mpi-comm",
        (
            (
                "[gpu-node-1][[45120,1],3][btl_tcp_frag.c:241:mca_btl_tcp_frag_recv] "
                "mca_btl_tcp_frag_recv: readv failed: Connection reset by peer (104)"
            ),
            "a TCP connection to another rank failed (the peer process",
            "Check that NetworkPolicies in team-a allow all",
            "openmpi",
        ),
    ),
    "mpirun-noticed-sigkill": (
        "mpi-abort",
        (
            (
                "--------------------------------------------------------------------------\nmpiru"
                "n noticed that process rank 1 with PID 4711 on node gpu-node-1 exited on signal "
                "15 (Terminated).\n---------------------------------------------------------------"
                "-----------"
            ),
            "Rank 1 on worker-1 was killed by signal 15 (Terminated)",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "err-revoked-v5-short-fatal": (
        "mpi-comm",
        (
            (
                "[gpu-node-1:00000] *** An error occurred in MPI_Comm_dup\n[gpu-node-1:00000] *** "
                "reported by process [3045457921,0]\n[gpu-node-1:00000] *** on communicator "
                "MPI_COMM_WORLD\n[gpu-node-1:00000] *** MPI_ERR_REVOKED: Communication Object "
                "Revoked\n[gpu-node-1:00000] *** MPI_ERRORS_ARE_FATAL (processes in this "
                "communicator will now abort,\n[gpu-node-1:00000] ***    and MPI will try to "
                "terminate your MPI job as well)"
            ),
            "a process of the communicator failed (MPI_ERR_PROC_FAILED",
            "A process of the communicator failed first: the",
            "openmpi",
        ),
    ),
    "primary-job-nonzero": (
        "mpi-abort",
        (
            (
                "-------------------------------------------------------\nPrimary job  terminated "
                "normally, but 1 process returned\na non-zero exit code. Per user-direction, the "
                "job has been aborted.\n-------------------------------------------------------"
            ),
            "A rank exited with a non-zero code and mpirun aborted the",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "mpirun-detected-nonzero": (
        "mpi-abort",
        (
            (
                "--------------------------------------------------------------------------\nmpiru"
                "n detected that one or more processes exited with non-zero status, thus "
                "causing\nthe job to be terminated. The first process to do so was:\n\n  Process "
                "name: [[45120,1],3]\n  Exit code:    "
                "1\n--------------------------------------------------------------------------"
            ),
            "Rank 3 on worker-0 exited with code 1",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
    "prterun-detected-nonzero": (
        "mpi-abort",
        (
            (
                "--------------------------------------------------------------------------\nprter"
                "un detected that one or more processes exited with non-zero status,\nthus "
                "causing the job to be terminated. The first process to do so was:\n\n   Process "
                "name: [prterun-gpu-node-0-4711@1,3]\n   Exit code:    "
                "1\n--------------------------------------------------------------------------"
            ),
            "Rank 3 on worker-0 exited with code 1",
            "Read the failing rank's own error above the",
            "openmpi",
        ),
    ),
}

# MPICH src/mpi/errhan/errnames.txt (its error stack's texts),
# src/mpid/ch3/channels/nemesis/netmod/tcp/socksm.c, src/mpid/ch4/netmod/ofi/ofi_events.c
_MPICH: dict[str, tuple[RuleId, Wording]] = {
    "ch3-communication-error-rank": (
        "mpi-comm",
        (
            (
                "Fatal error in PMPI_Allreduce: Unknown error class, error "
                "stack:\nPMPI_Allreduce(450)...................: MPI_Allreduce(sbuf=0x7ffd, "
                "rbuf=0x7ffe, count=1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) "
                "failed\nMPIDI_CH3U_Recvq_FDU_or_AEP(629)......: Communication error with rank 3"
            ),
            "Communication error with rank 3; check NetworkPolicies /",
            "Check that NetworkPolicies in team-a let the",
            "mpich",
        ),
    ),
    "ch3-sock-connection-reset": (
        "mpi-comm",
        (
            (
                "Fatal error in MPI_Recv: Other MPI error, error "
                "stack:\nMPIR_Recv_impl(99)...........: \nMPIDI_CH3I_Progress(244).....: "
                "\nMPID_nem_tcp_connpoll(1845)...: Communication error with rank 1: Connection "
                "reset by peer"
            ),
            "a connection to another rank was reset: the peer process",
            "MPICH (ch4): set FI_LOG_LEVEL=warn and",
            "mpich",
        ),
    ),
    "ch4-ofi-poll-failed": (
        "mpi-comm",
        (
            (
                "Abort(807500175) on node 3 (rank 3 in comm 0): Fatal error in "
                "internal_Allreduce: Other MPI error, error "
                "stack:\ninternal_Allreduce(4652).......: MPI_Allreduce(sendbuf=MPI_IN_PLACE, "
                "recvbuf=0x7f, count=1, MPI_INT, MPI_SUM, MPI_COMM_WORLD) "
                "failed\nMPIDI_OFI_handle_cq_error(1062): OFI poll failed "
                "(ofi_events.c:1064:MPIDI_OFI_handle_cq_error:Transport endpoint is not "
                "connected)"
            ),
            "OFI poll failed (ofi_events.c:1064:MPIDI_OFI_handle_cq_error",
            "Check the pods request the EFA / libfabric",
            "mpich",
        ),
    ),
    "gethostbyname-failed": (
        "mpi-comm",
        (
            (
                "Fatal error in MPI_Init: Other MPI error, error "
                "stack:\nMPIR_Init_thread(474).................:\nMPID_Init(190)..................."
                ".....: channel initialization failed\nMPIDI_CH3_Init(89)....................:\nMPI"
                "D_nem_init(413)....................:\nMPID_nem_tcp_init(196)................:\nMPI"
                "D_nem_tcp_get_business_card(414)...:\nMPID_nem_tcp_init(371)................: "
                "gethostbyname failed, gpu-node-2 (errno 1)"
            ),
            "MPI_Init failed in the MPICH-family library (MPICH",
            "MPICH (ch4): set FI_LOG_LEVEL=warn and",
            "mpich",
        ),
    ),
    "ch4-ofi-addr-notavail": (
        "mpi-comm",
        (
            (
                "Assertion failed in file src/mpid/ch4/netmod/ofi/ofi_impl.h at line 262: "
                "FI_ADDR_NOTAVAIL\n/usr/lib/libmpi.so.12(MPL_backtrace_show+0x39) [0x7f]"
            ),
            "MPICH's OFI netmod had no address for a peer",
            "MPICH (ch4): set FI_LOG_LEVEL=warn and",
            "mpich",
        ),
    ),
    "abort-mpi-abort": (
        "mpi-abort",
        (
            (
                "Abort(1) on node 3 (rank 3 in comm 0): application called "
                "MPI_Abort(MPI_COMM_WORLD, 1) - process 3"
            ),
            "Rank 3 on worker-0 aborted (exit 1)",
            "Read the failing rank's own error above the",
            "mpich",
        ),
    ),
}

# MVAPICH src/pm/mpirun/mpirun_rsh.c (its child handler waiting for mpispawn) and mpispawn.c (its child
# handler on a rank that ended)
_MVAPICH: dict[str, tuple[RuleId, Wording]] = {
    "mpirun-rsh-unable-launch": (
        "mpi-comm",
        (
            (
                "[gpu-node-0:mpirun_rsh][child_handler] Error in init phase, aborting! (1/2 "
                "mpispawn connections)"
            ),
            "mpirun_rsh / mpispawn could not start the ranks on a host",
            "MVAPICH: check mpispawn can start on every host",
            "mvapich",
        ),
    ),
    "mpispawn-child-exited": (
        "mpi-abort",
        (
            "[gpu-node-1:mpispawn_0][child_handler] MPI process (rank: 3, pid: 4711) exited with status 1",
            "Rank 3 on worker-1 exited with code 1",
            "MVAPICH (mpirun_rsh and its mpispawn on each",
            "mvapich",
        ),
    ),
}

# MPICH src/pm/hydra lib/utils/sock.c (HYDU_sock_connect, HYDU_sock_write), pm/pmiserv/pmip.c, pmiserv_cb.c
_HYDRA: dict[str, tuple[RuleId, Wording]] = {
    "sock-connect-refused": (
        "mpi-comm",
        (
            (
                "[proxy:0:1@gpu-node-2] HYDU_sock_connect (utils/sock/sock.c:145): unable to "
                'connect from "gpu-node-2" to "gpu-node-1" (Connection '
                "refused)\n[proxy:0:1@gpu-node-2] main (pm/pmiserv/pmip.c:183): unable to connect "
                "to server gpu-node-1 at port 41234 (check for firewalls!)"
            ),
            "workers unreachable: cannot connect to gpu-node-1; check",
            "Check that NetworkPolicies in team-a let the",
            "mpich",
        ),
    ),
    "sock-write-error": (
        "mpi-comm",
        (
            (
                "[mpiexec@gpu-node-1] HYDU_sock_write (utils/sock/sock.c:256): write error (Bad "
                "file descriptor)\n[mpiexec@gpu-node-1] HYD_pmcd_pmiserv_send_signal "
                "(pm/pmiserv/pmiserv_cb.c:178): unable to write data to proxy"
            ),
            "lost a Hydra proxy (Bad file descriptor); check",
            "Check that NetworkPolicies in team-a let the",
            "mpich",
        ),
    ),
    "bstrap-proxy-unable-run": (
        "mpi-comm",
        (
            (
                "[mpiexec@gpu-node-0] Error: Unable to run bstrap_proxy on gpu-node-2 (pid 4711, "
                "exit code 65280)"
            ),
            "Intel MPI's Hydra could not start its bootstrap proxy on a",
            "Intel MPI: set I_MPI_DEBUG=5 and",
            "intel-mpi",
        ),
    ),
}

# UCX src/ucs/type/status.c (ucs_status_string), src/ucs/debug/log.c (its [time] [host:pid:tid] file:line
# UCX LEVEL prefix), src/ucp/core/ucp_ep.c, src/ucs/sys/sock.c, src/uct/ib/base/ib_md.c,
# src/uct/ib/mlx5/ib_mlx5_log.c
_UCX: dict[str, tuple[RuleId, Wording]] = {
    "ep-timeout-no-callback": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]          ucp_ep.c:1409 UCX  ERROR  ep "
                "0x7f3c2a0b1000: error 'Endpoint timeout' on rc_mlx5/mlx5_0:1 will not be "
                "handled since no error callback is installed"
            ),
            "a UCX transport error: ep 0x7f3c2a0b1000: error 'Endpoint",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "ucx",
        ),
    ),
    "unreachable": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]      ucp_worker.c:1854 UCX  ERROR  "
                "ucp_ep_create() failed: Destination is unreachable"
            ),
            "UCX could not reach another process (UCS_ERR_UNREACHABLE)",
            "UCX: set UCX_LOG_LEVEL=info and check",
            "ucx",
        ),
    ),
    "connection-reset-remote": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]          sock.c:325  UCX  ERROR  "
                "recv(fd=41) failed: Connection reset by remote peer"
            ),
            "UCX's connection to another process was reset by that peer",
            "UCX: set UCX_LOG_LEVEL=info and check",
            "ucx",
        ),
    ),
    "reg-mr-cannot-allocate": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]           ib_md.c:349  UCX  ERROR "
                "ibv_reg_mr(address=0x7f3c2a000000, length=1073741824, access=0xf) failed: "
                "Cannot allocate memory"
            ),
            "UCX could not register memory for RDMA: raise the memlock",
            "UCX: set UCX_LOG_LEVEL=info and check",
            "ucx",
        ),
    ),
    "transport-retry-exceeded": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]   ib_mlx5_log.c:177  UCX  ERROR   "
                "Transport retry count exceeded on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)"
            ),
            "InfiniBand transport retries ran out: the peer or the link",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "ucx",
        ),
    ),
    "endpoint-not-connected": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]   ucp_worker.c:1783 UCX  ERROR   "
                "failed to connect to 10.0.0.3:43211: Endpoint is not connected"
            ),
            "could not establish a connection with another rank (or its",
            "UCX: set UCX_LOG_LEVEL=info and check",
            "ucx",
        ),
    ),
    "remote-access-error": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]     rc_mlx5.inl:399  UCX  ERROR   "
                "mlx5_0:1/IB: RC unexpected completion on QP 0x1a2b: Remote access error"
            ),
            "a UCX transport error: mlx5_0:1/IB: RC unexpected",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "ucx",
        ),
    ),
    "rejected": (
        "mpi-comm",
        (
            (
                "[1732867262.287512] [gpu-node-1:4711 :0]   wireup_cm.c:1143 UCX  ERROR   "
                "connection request failed on listener 0x55d0 with status Connection rejected"
            ),
            "a UCX transport error: connection request failed on",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "ucx",
        ),
    ),
}

# libfabric src/log.c (its libfabric:pid:time:prefix:prov:subsys:func():line<level> prefix),
# prov/efa/src/rdm/efa_rdm_pke.c, prov/verbs/src/verbs_cq.c, prov/tcp/src/xnet_cm.c; fi_strerror in
# src/fi_tostr.c
_LIBFABRIC: dict[str, tuple[RuleId, Wording]] = {
    "efa-unreachable": (
        "mpi-comm",
        (
            (
                "libfabric:4711:1732867262::efa:cq:efa_rdm_pke_handle_tx_error():559<warn> Error "
                "writing to EFA device. err: 113, message: Destination unreachable "
                "(efa_rdm_ep_handle_error)"
            ),
            "the EFA provider could not reach a peer: the security group",
            "EFA: the security group of the nodes must allow",
            "libfabric",
        ),
    ),
    "verbs-cq-error": (
        "mpi-comm",
        (
            (
                "libfabric:4711:1732867262::verbs:cq:vrb_poll_cq():419<warn> Work completion "
                "status: transport retry counter exceeded (12)"
            ),
            "InfiniBand transport retries ran out: the peer or the link",
            "Check the InfiniBand / RoCE fabric of the nodes",
            "libfabric",
        ),
    ),
    "tcp-connect-refused": (
        "mpi-comm",
        (
            "libfabric:4711:1732867262::tcp:ep_ctrl:xnet_cm_recv_resp():277<warn> Connection refused",
            "a connection to another rank was refused: nothing listened",
            "libfabric: set FI_LOG_LEVEL=warn and check",
            "libfabric",
        ),
    ),
    "efa-rnr": (
        "mpi-comm",
        (
            (
                "libfabric:4711:1732867262::efa:cq:efa_rdm_pke_handle_tx_error():559<warn> Error "
                "writing to EFA device. err: 15, message: Receiver not ready, peer 10.0.0.3 "
                "(efa_rdm_pke_handle_tx_error)"
            ),
            "the EFA provider reported a failed transfer with a peer",
            "EFA: the security group of the nodes must allow",
            "libfabric",
        ),
    ),
    "efa-handshake-timeout": (
        "mpi-comm",
        (
            (
                "libfabric:4711:1732867262::efa:ep_ctrl:efa_rdm_ep_trigger_handshake():423<warn> "
                "Unable to complete handshake with peer 10.0.0.3: Connection timed out"
            ),
            "the EFA provider timed out reaching a peer: the security",
            "EFA: the security group of the nodes must allow",
            "libfabric",
        ),
    ),
}

# OpenPMIx src/util/pmix_error.c (PMIx_Error_string's names) printed by PMIX_ERROR_LOG
# (src/util/pmix_output.h)
_PMIX: dict[str, tuple[RuleId, Wording]] = {
    "error-unreachable": (
        "mpi-comm",
        (
            "[gpu-node-1:04711] PMIX ERROR: UNREACHABLE in file ptl_tcp.c at line 790",
            "PMIx could not reach the PMIx server of a node (its",
            "PMIx: the node's daemon (prted / orted) is its",
            "openmpi",
        ),
    ),
    "error-lost-connection": (
        "mpi-comm",
        (
            (
                "[gpu-node-1:04711] PMIX ERROR: LOST-CONNECTION-TO-SERVER in file "
                "client/pmix_client.c at line 231"
            ),
            "PMIx lost its connection to the PMIx server (the node's",
            "PMIx: the node's daemon (prted / orted) is its",
            "openmpi",
        ),
    ),
    "error-timeout": (
        "mpi-comm",
        (
            "[gpu-node-1:04711] PMIX ERROR: TIMEOUT in file base/bfrop_base_unpack.c at line 750",
            "a connection or an exchange with another rank timed out",
            "PMIx: the node's daemon (prted / orted) is its",
            "openmpi",
        ),
    ),
}

# Gloo gloo/transport/tcp/pair.cc and unbound_buffer.cc (as PyTorch's third_party/gloo builds it),
# gloo/common/error.h (IoException)
_GLOO: dict[str, tuple[RuleId, Wording]] = {
    "pair-connect-refused": (
        "mpi-comm",
        (
            (
                "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect "
                "[10.0.0.2]:47231: Connection refused"
            ),
            "connect [10.0.0.2]:47231: Connection refused",
            "Find the rank that failed first — its own error",
            "pytorch",
        ),
    ),
    "pair-closed-by-peer": (
        "mpi-comm",
        (
            (
                "terminate called after throwing an instance of 'gloo::IoException'\n  what():  "
                "[../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                "[10.0.0.2]:15921"
            ),
            "Connection closed by peer [10.0.0.2]:15921",
            "Find the rank that failed first — its own error",
            "pytorch",
        ),
    ),
    "unbound-buffer-timeout": (
        "mpi-comm",
        (
            (
                "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                "Timed out waiting 1800000ms for recv operation to complete"
            ),
            "a connection or an exchange with another rank timed out",
            "Gloo: pin GLOO_SOCKET_IFNAME to the pod",
            "pytorch",
        ),
    ),
    "pair-read-reset": (
        "mpi-comm",
        (
            (
                "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Read error "
                "[10.0.0.2]:28761: Connection reset by peer"
            ),
            "Read error [10.0.0.2]:28761: Connection reset by peer",
            "Find the rank that failed first — its own error",
            "pytorch",
        ),
    ),
}

# PyTorch torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp, ProcessGroupNCCL.cpp (its watchdog);
# torch/distributed/elastic/rendezvous/api.py
_TORCH: dict[str, tuple[RuleId, Wording]] = {
    "socket-client-timeout": (
        "rendezvous",
        (
            (
                "[E1129 08:01:02.123456 4711 torch/csrc/distributed/c10d/socket.cpp:957] [c10d] "
                "The client socket has timed out after 900s while trying to connect to "
                "(gpu-node-0, 29500)."
            ),
            "Worker 0 could not reach the c10d store at gpu-node-0:29500",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
    "socket-bind-in-use": (
        "rendezvous",
        (
            (
                "[E1129 08:01:02.123456 4711 torch/csrc/distributed/c10d/socket.cpp:543] [c10d] "
                "The server socket has failed to listen on any local network address. The server "
                "socket has failed to bind to [::]:29500 (errno: 98 - Address already in use). "
                "The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address "
                "already in use)."
            ),
            "the processes never all met",
            "The master's c10d store could not listen on",
            "pytorch",
        ),
    ),
    "pgnccl-watchdog-timeout": (
        "mpi-comm",
        (
            (
                "[rank3]:[E1129 08:01:02.123456 4711 "
                "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught "
                "collective operation timeout: WorkNCCL(SeqNum=4242, OpType=ALLREDUCE, "
                "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600044 milliseconds before "
                "timing out."
            ),
            "collective ALLREDUCE timed out after 10m: a peer rank",
            "Find the rank that failed first — its own error",
            "pytorch",
        ),
    ),
    "pgnccl-watchdog-cuda-illegal": (
        "gpu-error",
        (
            (
                "[rank1]:[E1129 08:01:02.123456 4711 "
                "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1553] [PG 0 (default_pg) Rank "
                "1] Process group watchdog thread terminated with exception: CUDA error: an "
                "illegal memory access was encountered"
            ),
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the error",
            "pytorch",
        ),
    ),
    "tcpstore-clients-timeout": (
        "rendezvous",
        (
            (
                "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for "
                "clients. 1/2 clients joined."
            ),
            "Worker 0 waited 901s for the others at its c10d store and",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
    "rendezvous-timeout": (
        "rendezvous",
        (
            "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
            "Worker 0 timed out waiting at the rendezvous: the processes",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
    "pgnccl-heartbeat-timeout": (
        "mpi-comm",
        (
            (
                "[rank0]:[E1129 08:01:02.123456 4711 "
                "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1413] [PG 0 (default_pg) Rank "
                "0] Heartbeat monitor timed out! Process will be terminated after dumping debug "
                "info. workMetaList_.size()=1"
            ),
            "a connection or an exchange with another rank timed out",
            "torch.distributed: check MASTER_ADDR /",
            "pytorch",
        ),
    ),
    "store-connection-reset-later": (
        "mpi-comm",
        (
            (
                "[E1129 08:01:02.123456 4711 torch/csrc/distributed/c10d/TCPStore.cpp:273] "
                "[c10d] recvValue failed on SocketImpl(fd=31, addr=[10.0.0.4]:51234, "
                "remote=[10.0.0.2]:29500): Connection reset by peer"
            ),
            "a connection to another rank was reset: the peer process",
            "torch.distributed: check MASTER_ADDR /",
            "pytorch",
        ),
    ),
    "elastic-rdzv-closed": (
        "rendezvous",
        (
            "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
            "Worker 0 found the rendezvous closed: the processes never",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
    "dist-network-error-connect": (
        "rendezvous",
        (
            (
                "torch.distributed.DistNetworkError: The client socket has failed to connect to "
                "any network address of (gpu-node-0, 29500). The client socket has failed to "
                "connect to [gpu-node-0]:29500 (errno: 111 - Connection refused)."
            ),
            "Worker 0 could not reach the c10d store at",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
    "elastic-child-failed": (
        "mpi-abort",
        (
            (
                "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "
                "\n============================================================\ntrain.py "
                "FAILED\n------------------------------------------------------------\nFailures:\n  "
                "<NO_OTHER_FAILURES>\n------------------------------------------------------------"
                "\nRoot Cause (first observed failure):\n[0]:\n  time      : 2026-11-29_08:01:02\n  "
                "host      : gpu-node-1\n  rank      : 3 (local_rank: 3)\n  exitcode  : 1 (pid: "
                "4711)\n  error_file: <N/A>\n  traceback : To enable traceback see: "
                "https://pytorch.org/docs/stable/elastic/errors.html\n============================"
                "================================"
            ),
            "Rank 3 on worker-1 exited with code 1",
            "Read the failing rank's own error above the",
            "pytorch",
        ),
    ),
    "rdzv-connection-error": (
        "rendezvous",
        (
            (
                "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The "
                "connection to the C10d store has failed. See inner exception for details."
            ),
            "Worker 0 could not connect to the c10d store of the",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
}

# Horovod horovod/common/stall_inspector.cc, horovod/common/exceptions.py
_HOROVOD: dict[str, tuple[RuleId, Wording]] = {
    "shut-down": (
        "mpi-comm",
        (
            (
                "horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. "
                "This was caused by an exception on one of the ranks or an attempt to allreduce, "
                "allgather or broadcast a tensor after one of the ranks finished execution. If "
                "the shutdown was caused by an exception, you should see the exception in the "
                "log before the first shutdown message."
            ),
            "Horovod shut down because a rank failed or left early",
            "Find the rank that failed first — its own error",
            "horovod",
        ),
    ),
    "stall-shutdown": (
        "mpi-comm",
        (
            (
                "[2026-11-29 08:01:02.123456: E "
                "/tmp/pip-req-build/horovod/common/stall_inspector.cc:107] One or more rank "
                "(Stalled ranks: 3) has been stalled for longer than 120 seconds. Will shutdown."
            ),
            "a collective stalled: Horovod's stall inspector found it",
            "Horovod: the first failing rank's error is",
            "horovod",
        ),
    ),
    "horovodrun-process-exit": (
        "mpi-abort",
        (
            "Process 3 exit with status code 1.\nTerminating remaining workers after failure of Process 3.",
            "Rank 3 on worker-0 exited with code 1",
            "horovodrun (its Gloo launcher): the rank's own",
            "horovod",
        ),
    ),
}

# Linux mm/oom_kill.c across versions (``Kill process … or sacrifice child`` before 4.19, ``Killed process``
# with its RSS after; dump_header's ``invoked oom-killer``, dump_oom_summary's ``oom-kill:constraint=…``),
# mm/memcontrol.c (4.x's ``Task in … killed as a result of limit of …``)
_KERNEL: dict[str, tuple[RuleId, Wording]] = {
    "oom-kill-process-sacrifice-3x": (
        "oom",
        (
            (
                "[1234567.890123] Out of memory: Kill process 4711 (python) score 951 or "
                "sacrifice child\n[1234567.890456] Killed process 4711 (python) "
                "total-vm:83886080kB, anon-rss:66060288kB, file-rss:0kB, shmem-rss:0kB"
            ),
            "out of memory — node gpu-node-0 ran out of memory (the",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
    "memcg-killed-process-5x": (
        "oom",
        (
            (
                "[1234567.890123] Memory cgroup out of memory: Killed process 4711 (python) "
                "total-vm:83886080kB, anon-rss:66060288kB, file-rss:10240kB, shmem-rss:0kB, "
                "UID:0 pgtables:131072kB oom_score_adj:999"
            ),
            "out of memory (limit 16Gi; the kernel killed python)",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
    "invoked-oom-killer": (
        "oom",
        (
            (
                "[1234567.890000] python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), "
                "order=0, oom_score_adj=999"
            ),
            "out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
    "oom-kill-constraint-memcg": (
        "oom",
        (
            (
                "[1234567.890100] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=cri"
                "-containerd-ab12.scope,mems_allowed=0-1,oom_memcg=/kubepods.slice/kubepods-burst"
                "able.slice/kubepods-burstable-podab12.slice,task_memcg=/kubepods.slice/kubepods-"
                "burstable.slice/kubepods-burstable-podab12.slice/cri-containerd-ab12.scope,task="
                "python,pid=4711,uid=0"
            ),
            "out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
    "task-in-killed-limit-4x": (
        "oom",
        (
            (
                "[1234567.890200] Task in /kubepods/burstable/podab12/cd34 killed as a result of "
                "limit of /kubepods/burstable/podab12"
            ),
            "out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
    "global-oom-constraint-none": (
        "oom",
        (
            (
                "[1234567.890100] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,me"
                "ms_allowed=0-1,global_oom,task_memcg=/kubepods.slice/kubepods-burstable.slice/ku"
                "bepods-burstable-podab12.slice/cri-containerd-ab12.scope,task=python,pid=4711,ui"
                "d=0\n[1234567.890200] Out of memory: Killed process 4711 (python) "
                "total-vm:83886080kB, anon-rss:66060288kB, file-rss:0kB, shmem-rss:0kB, UID:0 "
                "pgtables:131072kB oom_score_adj:999"
            ),
            "out of memory — node gpu-node-0 ran out of memory (the",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
    "oom-reaper": (
        "oom",
        (
            (
                "[1234567.990100] oom_reaper: reaped process 4711 (python), now anon-rss:0kB, "
                "file-rss:0kB, shmem-rss:0kB"
            ),
            "out of memory — node gpu-node-0 ran out of memory (the",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
    "oom-v6-global": (
        "oom",
        (
            (
                "[1234567.890200] Out of memory: Killed process 4711 (python) "
                "total-vm:83886080kB, anon-rss:66060288kB, file-rss:0kB, shmem-rss:0kB, UID:0 "
                "pgtables:131072kB oom_score_adj:0"
            ),
            "out of memory — node gpu-node-0 ran out of memory (the",
            "Raise the memory limit of the role that failed",
            "pytorch",
        ),
    ),
}

# glibc string/strsignal.c and sysdeps/generic/siglist.h (the signal's words) as bash's jobs.c, zsh and srun
# report a job or task ended by one; CPython Python/faulthandler.c (its fatal signal handler, and on Windows
# its access violation)
_GLIBC: dict[str, tuple[RuleId, Wording]] = {
    "bash-segfault-core": (
        "segfault",
        (
            "bash: line 1:  4711 Segmentation fault      (core dumped) python train.py",
            "Worker 0 crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the log",
            "other",
        ),
    ),
    "sh-bus-error": (
        "segfault",
        (
            "/bin/sh: line 1:  4711 Bus error               (core dumped) ./solver --steps 100",
            "Worker 0 crashed with a bus error (SIGBUS)",
            "A bus error usually means shared memory ran",
            "other",
        ),
    ),
    "faulthandler-segv": (
        "segfault",
        (
            (
                "Fatal Python error: Segmentation fault\n\nThread 0x00007f3c2a0b1740 (most recent "
                'call first):\n  File "/opt/app/train.py", line 88 in step'
            ),
            "Worker 0 crashed with a segmentation fault (SIGSEGV) in",
            "Read the backtrace after the signal in the log",
            "pytorch",
        ),
    ),
    "zsh-segfault": (
        "segfault",
        (
            "zsh: segmentation fault (core dumped)  python train.py",
            "Worker 0 crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the log",
            "other",
        ),
    ),
    "zsh-bus-error": (
        "segfault",
        (
            "zsh: bus error  ./solver",
            "Worker 0 crashed with a bus error (SIGBUS)",
            "A bus error usually means shared memory ran",
            "other",
        ),
    ),
    "faulthandler-bus": (
        "segfault",
        (
            (
                "Fatal Python error: Bus error\n\nThread 0x00007f3c2a0b1740 (most recent call "
                'first):\n  File "/opt/app/data.py", line 41 in load'
            ),
            "Worker 0 crashed with a bus error (SIGBUS) in load",
            "A bus error usually means shared memory ran",
            "pytorch",
        ),
    ),
    "srun-task-segfault": (
        "segfault",
        (
            "srun: error: gpu-node-1: task 3: Segmentation fault (core dumped)",
            "Worker 0 crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the log",
            "other",
        ),
    ),
    "faulthandler-windows-access-violation": (
        "segfault",
        (
            (
                "Windows fatal exception: access violation\n\nThread 0x00001a2c (most recent call "
                'first):\n  File "C:\\\\app\\\\train.py", line 88 in step'
            ),
            "Worker 0 crashed with a segmentation fault (SIGSEGV) in",
            "Read the backtrace after the signal in the log",
            "pytorch",
        ),
    ),
}

# NVML nvml.h (nvmlReturn_t's NVML_ERROR_GPU_IS_LOST) and nvidia-smi's report of a device it cannot get a
# handle for; the NVIDIA driver's Xid in the kernel log (NVRM: Xid)
_NVML: dict[str, tuple[RuleId, Wording]] = {
    "nvml-gpu-is-lost": (
        "gpu-error",
        (
            "Failed to initialize NVML: GPU access blocked by the operating system\nNVML_ERROR_GPU_IS_LOST",
            "GPU hardware error on node gpu-node-0 — the GPU is lost and",
            "Take the node out of service and report it to",
            "cuda",
        ),
    ),
    "nvidia-smi-device-handle-unknown": (
        "gpu-error",
        (
            "Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error",
            "GPU hardware error on node gpu-node-0 — the GPU is lost and",
            "Take the node out of service and report it to",
            "cuda",
        ),
    ),
    "xid-79": (
        "gpu-error",
        (
            "[1234567.890123] NVRM: Xid (PCI:0000:3b:00): 79, pid=4711, GPU has fallen off the bus.",
            "GPU hardware error on node gpu-node-0 — Xid 79: the GPU has",
            "Take the node out of service and report it to",
            "cuda",
        ),
    ),
}

# JAX jax/_src/distributed.py over XLA's coordination service
# (xla/tsl/distributed_runtime/coordination/coordination_service.cc: its start-up barrier
# PjRT_Client_Connect)
_JAX: dict[str, tuple[RuleId, Wording]] = {
    "barrier-pjrt-connect": (
        "rendezvous",
        (
            (
                "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed out. "
                "Barrier_id: PjRT_Client_Connect. Timed out task "
                "names:\n/job:jax_worker/replica:0/task:1"
            ),
            "Worker 0 could not register all tasks with the coordination",
            "Check that the master replica (rank 0) is",
            "jax",
        ),
    ),
}

# the API server's quota refusal (plugin/pkg/admission/resourcequota) as its clients print it: kubectl's
# Error from server (Forbidden) (staging/src/k8s.io/kubectl/pkg/cmd/util/helpers.go), the Python client's
# ApiException (kubernetes/client/exceptions.py)
_KUBERNETES_CLIENTS: dict[str, tuple[RuleId, Wording]] = {
    "kubectl-forbidden-quota": (
        "quota",
        (
            (
                'Error from server (Forbidden): error when creating "trainjob.yaml": pods '
                '"llm-node-0" is forbidden: exceeded quota: compute-resources, requested: '
                "requests.cpu=32, used: requests.cpu=64, limited: requests.cpu=64"
            ),
            "Kubernetes refused to create pod llm-node-0: ResourceQuota",
            "See the quota and what uses it: kubectl -n",
            "other",
        ),
    ),
    "python-client-forbidden": (
        "quota",
        (
            (
                "kubernetes.client.exceptions.ApiException: (403)\nReason: Forbidden\nHTTP "
                'response body: {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failur'
                'e","message":"pods \\"llm-node-0\\" is forbidden: exceeded quota: gpu-quota, '
                "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: "
                'requests.nvidia.com/gpu=8","reason":"Forbidden","details":{"name":"llm-node-0","'
                'kind":"pods"},"code":403}'
            ),
            "Kubernetes refused to create pod llm-node-0: ResourceQuota",
            "See the quota and what uses it: kubectl -n",
            "other",
        ),
    ),
}

# Go src/runtime/panic.go and signal_unix.go (a nil dereference's panic and its signal line)
_GO: dict[str, tuple[RuleId, Wording]] = {
    "go-sigsegv": (
        "segfault",
        (
            (
                "panic: runtime error: invalid memory address or nil pointer dereference\n[signal "
                "SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x4a5b6c]"
            ),
            "Worker 0 crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the log",
            "other",
        ),
    ),
    "go-runtime-out-of-memory": (
        "oom",
        (
            "fatal error: runtime: out of memory\n\nruntime stack:\nruntime.throw({0x1a2b3c, 0x16})",
            "out of memory — node gpu-node-0 ran out of memory",
            "Raise the memory limit of the role that failed",
            "other",
        ),
    ),
    "go-unexpected-fault-bus": (
        "segfault",
        (
            (
                "unexpected fault address 0x7f3c2a000000\nfatal error: fault\n[signal SIGBUS: bus "
                "error code=0x2 addr=0x7f3c2a000000 pc=0x46a1b2]"
            ),
            "Worker 0 crashed with a bus error (SIGBUS)",
            "A bus error usually means shared memory ran",
            "other",
        ),
    ),
}

# OpenJDK src/hotspot/share/utilities/vmError.cpp (the JVM's fatal error report)
_JAVA: dict[str, tuple[RuleId, Wording]] = {
    "jvm-sigsegv": (
        "segfault",
        (
            (
                "#\n# A fatal error has been detected by the Java Runtime Environment:\n#\n#  "
                "SIGSEGV (0xb) at pc=0x00007f3c2a0b1d3e, pid=4711, tid=4790\n#"
            ),
            "Worker 0 crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the log",
            "other",
        ),
    ),
}

# Cargo src/cargo/util/errors.rs (a process that did not exit successfully) and Rust library/std's
# ExitStatus Display (the signal's name and its words)
_RUST: dict[str, tuple[RuleId, Wording]] = {
    "cargo-sigsegv": (
        "segfault",
        (
            (
                "error: process didn't exit successfully: `target/release/trainer` (signal: 11, "
                "SIGSEGV: invalid memory reference)"
            ),
            "Worker 0 crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the log",
            "other",
        ),
    ),
}

# strerror(ENOSPC) and strerror(EDQUOT) in each C library and runtime: glibc sysdeps/gnu/errlist.h, musl
# src/errno/__strerror.h (``Quota exceeded``), Go src/syscall/zerrors_linux_amd64.go (lower case), Java's
# libjava io_util_md.c, Rust library/std/src/io/error.rs (ErrorKind::StorageFull, FilesystemQuotaExceeded),
# CPython's OSError, Node lib/internal/errors.js (uvException), Windows' ERROR_DISK_FULL
_ERRNO: dict[str, tuple[RuleId, Wording]] = {
    "python-enospc": (
        "disk-full",
        (
            "OSError: [Errno 28] No space left on device: '/ckpt/step_4000/model.safetensors'",
            "no space left on device while writing a checkpoint",
            "See which filesystem is full: kubectl -n team-a",
            "pytorch",
        ),
    ),
    "python-edquot": (
        "disk-full",
        (
            "OSError: [Errno 122] Disk quota exceeded: '/home/team-a/ckpt/step_4000.pt'",
            "disk quota exceeded",
            "See which filesystem is full: kubectl -n team-a",
            "pytorch",
        ),
    ),
    "musl-edquot": (
        "disk-full",
        (
            "cp: error writing '/data/shard-0042.bin': Quota exceeded",
            "disk quota exceeded",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "go-enospc": (
        "disk-full",
        (
            "Error: write /ckpt/step-4000/rank-3.bin: no space left on device",
            "no space left on device",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "go-edquot": (
        "disk-full",
        (
            "Error: write /home/team-a/out/part-0003: disk quota exceeded",
            "disk quota exceeded",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "java-enospc": (
        "disk-full",
        (
            (
                'Exception in thread "main" java.io.IOException: No space left on device\n\tat '
                "java.base/java.io.FileOutputStream.writeBytes(Native Method)"
            ),
            "no space left on device",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "rust-storage-full": (
        "disk-full",
        (
            'Error: Os { code: 28, kind: StorageFull, message: "No space left on device" }',
            "no space left on device",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "rust-quota-exceeded": (
        "disk-full",
        (
            'Error: Os { code: 122, kind: FilesystemQuotaExceeded, message: "Disk quota exceeded" }',
            "disk quota exceeded",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "node-enospc": (
        "disk-full",
        (
            "Error: ENOSPC: no space left on device, write",
            "no space left on device",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "windows-disk-full": (
        "disk-full",
        (
            "OSError: [Errno 28] There is not enough space on the disk",
            "no space left on device",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "hdf5-enospc": (
        "disk-full",
        (
            (
                "HDF5-DIAG: Error detected in HDF5 (1.12.2) thread 0:\n  #000: H5Dio.c line 291 "
                "in H5Dwrite(): can't write data\n    major: Dataset\n    minor: Write failed\n  "
                "#005: H5FDsec2.c line 851 in H5FD__sec2_write(): file write failed: time = Sun "
                "Nov 29 08:01:02 2026\n, filename = '/ckpt/out.h5', file descriptor = 5, errno = "
                "28, error message = 'No space left on device', buf = 0x7f, total write size = "
                "1048576, bytes this sub-write = 1048576, bytes actually written = "
                "18446744073709551615, offset = 0"
            ),
            "no space left on device",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "tar-enospc": (
        "disk-full",
        (
            "tar: data/shard-0042.bin: Cannot write: No space left on device",
            "no space left on device",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "dd-edquot": (
        "disk-full",
        (
            "dd: error writing '/home/team-a/blob': Disk quota exceeded",
            "disk quota exceeded",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
    "python-enospc-shm": (
        "disk-full",
        (
            "OSError: [Errno 28] No space left on device: '/dev/shm/psm_4711'",
            "no space left on device (/dev/shm/psm_4711)",
            "See which filesystem is full: kubectl -n team-a",
            "pytorch",
        ),
    ),
    "java-quota": (
        "disk-full",
        (
            (
                "java.io.IOException: Disk quota exceeded\n\tat "
                "java.base/java.io.FileOutputStream.writeBytes(Native Method)"
            ),
            "disk quota exceeded",
            "See which filesystem is full: kubectl -n team-a",
            "other",
        ),
    ),
}

# Kubernetes pkg/kubelet/eviction/helpers.go (the eviction's messages), plugin/pkg/admission/resourcequota
# (the quota's refusal), plugin/pkg/admission/limitranger/admission.go (the LimitRange's), node-problem-
# detector config/kernel-monitor.json (OOMKilling), pkg/kubelet/oom/oom_watcher_linux.go (SystemOOM): an
# Event's reason and message
_KUBERNETES: dict[str, tuple[RuleId, str, str, str, str]] = {
    "evicted-ephemeral-storage": (
        "disk-full",
        "Evicted",
        (
            "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, "
            "available: 2Gi. Container node was using 45Gi, request is 0, has larger "
            "consumption of ephemeral-storage."
        ),
        "The kubelet evicted trainjob/llm: the node was low on",
        "Ephemeral storage is the node's disk under the",
    ),
    "evicted-emptydir": (
        "disk-full",
        "Evicted",
        'Usage of EmptyDir volume "dshm" exceeds the limit "8Gi".',
        "The kubelet evicted trainjob/llm: emptyDir volume dshm",
        "Ephemeral storage is the node's disk under the",
    ),
    "evicted-pod-ephemeral-limit": (
        "disk-full",
        "Evicted",
        "Pod ephemeral local storage usage exceeds the total limit of containers 20Gi.",
        "The kubelet evicted trainjob/llm: its ephemeral local",
        "Ephemeral storage is the node's disk under the",
    ),
    "evicted-memory": (
        "oom",
        "Evicted",
        (
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: "
            "48Mi. Container node was using 61Gi, request is 32Gi, has larger consumption of "
            "memory."
        ),
        "The kubelet evicted trainjob/llm: its node was low on memory",
        "Set each role's memory request equal to its",
    ),
    "oomkilling-npd": (
        "oom",
        "OOMKilling",
        (
            "Memory cgroup out of memory: Killed process 4711 (python) total-vm:83886080kB, "
            "anon-rss:66060288kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:131072kB "
            "oom_score_adj:999"
        ),
        "out of memory — node gpu-node-0 ran out of memory (the",
        "Raise the memory limit of the role that failed",
    ),
    "system-oom": (
        "oom",
        "SystemOOM",
        "System OOM encountered, victim process: python, pid: 4711",
        "out of memory — node gpu-node-0 ran out of memory (the",
        "Raise the memory limit of the role that failed",
    ),
    "quota-exceeded": (
        "quota",
        "FailedCreate",
        (
            'Error creating: pods "llm-node-0" is forbidden: exceeded quota: '
            "compute-resources, requested: limits.memory=64Gi, used: limits.memory=100Gi, "
            "limited: limits.memory=128Gi"
        ),
        "Kubernetes refused to create pod llm-node-0: ResourceQuota",
        "See the quota and what uses it: kubectl -n",
    ),
    "quota-must-specify": (
        "quota",
        "FailedCreate",
        (
            'Error creating: pods "llm-node-0" is forbidden: failed quota: '
            "compute-resources: must specify limits.cpu for: node; limits.memory for: node"
        ),
        "Kubernetes refused to create pod llm-node-0: ResourceQuota",
        "Set resources.requests and resources.limits for",
    ),
    "limitrange-maximum": (
        "quota",
        "FailedCreate",
        (
            'Error creating: pods "llm-node-0" is forbidden: maximum memory usage per '
            "Container is 32Gi, but limit is 64Gi"
        ),
        "Kubernetes refused to create pod llm-node-0: the",
        "See the namespace's bounds: kubectl -n team-a",
    ),
    "limitrange-minimum": (
        "quota",
        "FailedCreate",
        (
            'Error creating: pods "llm-node-0" is forbidden: minimum cpu usage per Pod is 2, '
            "but request is 500m"
        ),
        "Kubernetes refused to create pod llm-node-0: the",
        "See the namespace's bounds: kubectl -n team-a",
    ),
    "quota-gpu": (
        "quota",
        "FailedCreate",
        (
            'Error creating: pods "llm-node-1" is forbidden: exceeded quota: gpu-quota, '
            "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=8, limited: "
            "requests.nvidia.com/gpu=8"
        ),
        "Kubernetes refused to create pod llm-node-1: ResourceQuota",
        "See the quota and what uses it: kubectl -n",
    ),
    "limitrange-ratio": (
        "quota",
        "FailedCreate",
        (
            'Error creating: pods "llm-node-0" is forbidden: memory max limit to request '
            "ratio per Container is 2, but provided ratio is 4.000000"
        ),
        "Kubernetes refused to create pod llm-node-0: the",
        "See the namespace's bounds: kubectl -n team-a",
    ),
    "oomkilling-old": (
        "oom",
        "OOMKilling",
        (
            "Memory cgroup out of memory: Kill process 4711 (python) score 1000 or sacrifice "
            "child\nKilled process 4711 (python) total-vm:83886080kB, anon-rss:66060288kB, "
            "file-rss:0kB"
        ),
        "out of memory — node gpu-node-0 ran out of memory (the",
        "Raise the memory limit of the role that failed",
    ),
    "quota-object-count": (
        "quota",
        "FailedCreate",
        (
            'Error creating: pods "llm-node-3" is forbidden: exceeded quota: object-counts, '
            "requested: count/pods=1, used: count/pods=20, limited: count/pods=20"
        ),
        "Kubernetes refused to create pod llm-node-3: ResourceQuota",
        "See the quota and what uses it: kubectl -n",
    ),
}


_LIBRARIES: dict[str, dict[str, tuple[RuleId, Wording]]] = {
    "cuda": _CUDA_RUNTIME,
    "cuda-driver": _CUDA_DRIVER,
    "cuda-libs": _CUDA_LIBRARIES,
    "hip": _HIP,
    "nccl": _NCCL,
    "rccl": _RCCL,
    "ompi": _OPEN_MPI,
    "mpich": _MPICH,
    "hydra": _HYDRA,
    "mvapich": _MVAPICH,
    "ucx": _UCX,
    "libfabric": _LIBFABRIC,
    "pmix": _PMIX,
    "gloo": _GLOO,
    "torch": _TORCH,
    "horovod": _HOROVOD,
    "kernel": _KERNEL,
    "glibc": _GLIBC,
    "nvml": _NVML,
    "jax": _JAX,
    "k8s-clients": _KUBERNETES_CLIENTS,
    "go": _GO,
    "java": _JAVA,
    "rust": _RUST,
    "errno": _ERRNO,
}


@pytest.mark.parametrize(WORDING_ARGS, catalog_rows(_LIBRARIES))
def test_a_librarys_own_message_is_its_familys_with_its_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


@pytest.mark.parametrize(
    ("rule", "reason", "text", "said", "step"),
    [pytest.param(*row, id=key) for key, row in _KUBERNETES.items()],
)
def test_a_kubernetes_events_own_message_is_its_familys(
    rule: RuleId, reason: str, text: str, said: str, step: str
) -> None:
    fires_saying(text, rule, said, step, stack="pytorch", where="event", reason=reason)


def test_every_catalog_row_is_told_apart() -> None:
    """The rows cover every rule the catalogs reach, each row under one id."""
    rules = {rule for table in _LIBRARIES.values() for rule, _ in table.values()}
    rules |= {row[0] for row in _KUBERNETES.values()}
    assert rules == set(TEXT_RULES)


# the same catalogs' lines that report no failure: INFO, a retry, a warning the run goes on after, advice
_QUIET: dict[str, tuple[str, str]] = {
    # NCCL src/misc/ibvwrap.cc: INFO on a host without InfiniBand, then the socket transport
    "nccl-info-ibverbs-missing": (
        "gpu-node-1:4711:4711 [0] NCCL INFO Failed to open libibverbs.so[.1]",
        "pytorch",
    ),
    # NCCL src/plugin/net.cc: no external network plugin, its own used
    "nccl-info-net-plugin-missing": (
        "gpu-node-1:4711:4711 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        "pytorch",
    ),
    # NCCL src/misc/socket.cc: socketPollConnect retrying a refused connection
    "nccl-warn-socket-retry": (
        "gpu-node-1:4711:4711 [0] NCCL WARN socketPollConnect: connect returned Connection refused, retrying (1/34) after sleep for 100 msec",
        "pytorch",
    ),
    # NCCL src/init.cc: a communicator's initialisation done
    "nccl-info-comm-init-done": (
        "gpu-node-1:4711:4711 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0xabc - Init COMPLETE",
        "pytorch",
    ),
    # PyTorch c10/cuda/CUDAException.cpp's hint, alone
    "cuda-cuda-launch-blocking-hint": ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1", "pytorch"),
    # PyTorch c10/cuda/CUDACachingAllocator.cpp's hint, alone
    "cuda-pytorch-alloc-conf-hint": (
        "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        "pytorch",
    ),
    # UCX src/ucp/core/ucp_context.c: a transport asked for that the node lacks, others used
    "ucx-warn-transport-unavailable": (
        "[1732867262.287512] [gpu-node-1:4711 :0]      ucp_context.c:1107 UCX  WARN  transport 'rc_mlx5' is not available, please use one or more of: cma, posix, self, sysv, tcp",
        "ucx",
    ),
    # libfabric src/fabric.c: a provider's library not loaded, the others tried
    "libfabric-info-provider-skipped": (
        "libfabric:4711:1732867262::core:core:ofi_reg_dl_prov():675<warn> dlopen(/usr/lib64/libfabric/libpsmx2-fi.so): libpsm2.so.2: cannot open shared object file: No such file or directory",
        "libfabric",
    ),
    # Open MPI's advice on btl_tcp_if_include (its FAQ's wording)
    "ompi-btl-tcp-if-include-help": (
        "Use the btl_tcp_if_include MCA parameter to restrict which interfaces Open MPI uses, e.g. mpirun --mca btl_tcp_if_include eth0",
        "openmpi",
    ),
    # Open MPI opal/mca/btl/openib/help-mpi-btl-openib.txt: a device's warning, the run goes on over another BTL
    "ompi-openib-deprecated-warning": (
        "--------------------------------------------------------------------------\nWARNING: There was an error initializing an OpenFabrics device.\n\n  Local host:   gpu-node-1\n  Local device: mlx5_0\n--------------------------------------------------------------------------",
        "openmpi",
    ),
    # PyTorch torch/csrc/distributed/c10d/socket.cpp: a warning on one address family, the next tried
    "torch-c10d-warn-ipv6": (
        "[W1129 08:01:02.123456 4711 torch/csrc/distributed/c10d/socket.cpp:697] [c10d] The client socket cannot be initialized to connect to [gpu-node-0]:29500 (errno: 97 - Address family not supported by protocol).",
        "pytorch",
    ),
    # PyTorch torch/csrc/distributed/c10d/TCPStore.cpp: the client retrying the store
    "torch-tcpstore-retry": (
        "[I1129 08:01:02.123456 4711 torch/csrc/distributed/c10d/TCPStore.cpp:315] [c10d] TCP client connect to master at gpu-node-0:29500 failed, retrying in 1s (Connection refused)",
        "pytorch",
    ),
    # an entrypoint's note on oom_score_adj (mm/oom_kill.c's knob named, no kill)
    "kernel-oom-score-adj-set": (
        "Setting oom_score_adj to 999 for the training container so the kernel kills it first under memory pressure.",
        "pytorch",
    ),
    # coreutils df's table: a disk nearly full, nothing refused
    "errno-df-output": (
        "Filesystem      Size  Used Avail Use% Mounted on\n/dev/nvme0n1p1  1.8T  1.7T  100G  95% /ckpt",
        "other",
    ),
    # kubectl describe resourcequota's usage line, nothing refused
    "k8s-quota-described": ("ResourceQuota compute-resources: limits.memory 100Gi/128Gi used", "pytorch"),
    # a runbook's advice naming MPICH's 'OFI poll failed'
    "mpich-errnames-help": (
        "Set MPIR_CVAR_CH4_OFI_ENABLE_TAGGED=0 if you see 'OFI poll failed' with this provider.",
        "mpich",
    ),
    # rocm-smi's temperature line
    "hip-rocm-smi-ok": ("GPU[0]          : Temperature (Sensor edge) (C): 35.0", "pytorch"),
    # NCCL src/misc/socket.cc: a connect it retries
    "nccl-warn-connect-retry": (
        "gpu-node-1:4711:4711 [0] NCCL WARN Call to connect returned Connection timed out, retrying",
        "pytorch",
    ),
    # NCCL src/transport/net_ib.cc: the IB devices it uses
    "nccl-info-ib-device": (
        "gpu-node-1:4711:4711 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.2<0>",
        "pytorch",
    ),
    # NCCL src/transport.cc: a channel's route
    "nccl-info-channel": (
        "gpu-node-1:4711:4790 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
        "pytorch",
    ),
    # UCX src/ucp/core/ucp_context.c: its version, at INFO
    "ucx-info-config": (
        "[1732867262.287512] [gpu-node-1:4711 :0]     ucp_context.c:2127 UCX  INFO  Version 1.16.0 (loaded from /usr/lib/libucp.so.0)",
        "ucx",
    ),
    # PyTorch ProcessGroupNCCL.cpp: its options, at INFO
    "torch-pgnccl-init-info": (
        "[I1129 08:01:02.123456 4711 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:852] [PG 0 Rank 0] ProcessGroupNCCL initialization options: size: 16, global rank: 0, TIMEOUT(ms): 600000",
        "pytorch",
    ),
    # PyTorch torch/distributed/elastic/agent/server/api.py: a rendezvous completed
    "torch-elastic-restart-info": (
        "[2026-11-29 08:01:02,123] torch.distributed.elastic.agent.server.api: [INFO] [default] Rendezvous complete for workers. Result:",
        "pytorch",
    ),
    # Linux mm/oom_kill.c's task dump header alone (no kill)
    "kernel-memcg-stats-header": ("Tasks state (memory values in pages):", "pytorch"),
    # nvidia-smi -q's ECC counters, all zero
    "cuda-nvidia-smi-ecc-zero": (
        "        Volatile\n            SRAM Correctable              : 0\n            SRAM Uncorrectable            : 0\n            DRAM Correctable              : 0\n            DRAM Uncorrectable            : 0",
        "cuda",
    ),
    # kubectl describe resourcequota's row, under its limit
    "k8s-quota-ok-describe": ("requests.nvidia.com/gpu  8     16", "pytorch"),
    # Open MPI opal/mca/base/mca_base_components_register.c at verbose
    "ompi-mca-param-echo": (
        "[gpu-node-0:04711] mca: base: components_register: registering framework btl components",
        "openmpi",
    ),
    # libfabric prov/efa/src/efa_device.c at info
    "libfabric-efa-info-device": (
        "libfabric:4711:1732867262::efa:core:efa_device_construct():88<info> Opened EFA device rdmap16s27",
        "libfabric",
    ),
    # quota(1)'s report, under its limit
    "errno-quota-cli-report": (
        "Disk quotas for user team-a (uid 1001):\n     Filesystem  blocks   quota   limit   grace   files   quota   limit   grace\n      /dev/sdb1  912000  1000000 1100000            120       0       0",
        "other",
    ),
    # dcgmi health's report, healthy
    "gpu-dcgm-healthy": (
        "Health Monitor Report\n+----------------------------+---------------------------------------------------------+\n| Overall Health: Healthy",
        "cuda",
    ),
    # MPI_Abort named in advice (no rank aborted)
    "mpich-abort-message-in-help": (
        "To abort all processes, call MPI_Abort(MPI_COMM_WORLD, errorcode).",
        "mpich",
    ),
    # PyTorch torch/distributed/elastic/agent/server/api.py: a restart it makes, at WARNING
    "torch-elastic-restart": (
        "[2026-11-29 08:01:02,123] torch.distributed.elastic.agent.server.api: [WARNING] Restarting worker group (restart 1/3)",
        "pytorch",
    ),
    # JAX jax/_src/distributed.py: connecting, at INFO
    "jax-initialize-info": (
        "I1129 08:01:02.123456 4711 distributed.py:105] Connecting to JAX distributed service on gpu-node-0:1234",
        "jax",
    ),
    # a ResourceQuota's manifest echoed
    "k8s-quota-yaml": (
        'apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpu-quota\nspec:\n  hard:\n    requests.nvidia.com/gpu: "8"',
        "other",
    ),
    # a handler for the signals installed (no crash)
    "glibc-sigsegv-handler-install": (
        "Installed handler for SIGSEGV and SIGBUS (backtrace on crash)",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_catalogs_line_that_reports_no_failure_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
