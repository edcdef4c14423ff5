"""The failures older releases, the nodes and clusters, the clouds and the other accelerators print, read
from their own catalogs.

The third catalog pass of issue 35, on what the first two (the libraries' own message catalogs; the
launchers', runtimes' and frameworks') did not cover:

- the older releases of the libraries already covered, whose wording differs: NCCL 2.3-2.10's WARN lines,
  PyTorch 1.x's c10d (``unhandled system error`` with no version suffix, its watchdog and blocking wait,
  its THC ``cuda runtime error (N) : …`` strings), Horovod 0.16-0.21's shutdown, TensorFlow 1.x's
  ``OOM when allocating`` and gRPC ``UnavailableError``, Open MPI 1.10-3.x's ORTE-era help texts and its
  tcp / openib BTLs;
- the node's and the cluster's catalogs: the kernel lines node-problem-detector's kernel monitor matches,
  the NVIDIA driver's Xids, the kubelet's eviction, OOM and sandbox Events, Volcano's and Kueue's queue
  refusals, the clouds' quota and capacity refusals (Compute Engine, Azure, EC2 under Karpenter) and the
  managed training services' failure reasons (SageMaker, AWS Batch, Vertex AI, Azure ML);
- the other accelerators' runtimes: AMD's ROCr, ROCclr, amdgpu, HIP and rocBLAS; Intel's XPU allocator,
  Level Zero and SYCL; Habana's Gaudi bridge and SynapseAI; AWS Neuron; the TPU runtime and compiler.

Each table is one source, each row's comment the file or document its message comes from; a row is the
message as printed (format specifiers filled in), the rule its failure belongs to, what the finding says and
a step of its remediation (the library's own where the rules know it). The near-misses come from the same
catalogs: INFO lines, a retry or a fallback the run went on after, a setting echoed, a corrected error, a
node's status, a queue that admitted the job.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Catalog, catalog_rows, fires_saying, stays_quiet
from tests.rules.corpus_score import TEXT_RULES

# NCCL 2.3-2.10's WARN lines (src/include/socket.h's connect / recv, src/transport/net_ib.cc's completion,
# src/include/shm.h, src/include/alloc.h's CUDACHECK, bootstrap.cc), as their releases formatted them
_NCCL_OLD: Catalog = {
    # NCCL 2.3 src/include/socket.h: connectAddress's WARN
    "nccl23-connect": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4790 [0] include/socket.h:390 NCCL WARN Connect to 10.0.0.2<43215> failed : Connection refused\ngpu-node-1:4711:4790 [0] NCCL INFO bootstrap.cc:95 -> 2",
            "NCCL's socket to another rank was refused: nothing listened",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    # NCCL 2.4 src/include/socket.h: socketReceive's 'Net : Call to recv … failed'
    "nccl24-recv-reset": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4790 [0] include/socket.h:423 NCCL WARN Net : Call to recv from 10.0.0.2<56789> failed : Connection reset by peer\ngpu-node-1:4711:4790 [0] NCCL INFO include/net.h:28 -> 2",
            "a socket to another rank failed: Connection reset by peer",
            "Check that NetworkPolicies in team-a allow",
            "pytorch",
        ),
    ),
    # NCCL 2.5 src/include/socket.h: socketProgress on a closed peer
    "nccl25-peer-shutdown": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4790 [0] include/socket.h:403 NCCL WARN Net : Connection closed by remote peer",
            "a socket to another rank failed: connection closed by remote",
            "Check that NetworkPolicies in team-a allow",
            "pytorch",
        ),
    ),
    # NCCL 2.7 src/transport/net_ib.cc: ncclIbTest's completion error (before its 'to <addr>' form)
    "nccl27-ib-completion": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4795 [3] transport/net_ib.cc:820 NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0, vendor err 129",
            "an InfiniBand work completion failed: the peer or the link",
            "Check the InfiniBand / RoCE fabric of the",
            "pytorch",
        ),
    ),
    # NCCL 2.6 src/include/shm.h: shmOpen's 'Error while creating shared memory segment'
    "nccl26-shm-create": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4790 [1] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-a1b2c3d4-0-1-0 (size 9637888)\ngpu-node-1:4711:4790 [1] NCCL INFO transport/shm.cc:100 -> 2",
            "/dev/shm is too small for NCCL's shared-memory transport;",
            "Mount a memory-backed emptyDir at /dev/shm in",
            "pytorch",
        ),
    ),
    # NCCL 2.8 src/include/checks.h CUDACHECK under src/include/alloc.h
    "nccl28-cuda-oom": (
        "gpu-oom",
        (
            "gpu-node-1:4711:4790 [0] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'\ngpu-node-1:4711:4790 [0] NCCL INFO channel.cc:39 -> 1",
            "GPU out of memory (NCCL could not allocate its buffers)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # NCCL 2.9 src/include/checks.h CUDACHECK in enqueue.cc
    "nccl29-cuda-illegal": (
        "gpu-error",
        (
            "gpu-node-1:4711:4790 [0] enqueue.cc:215 NCCL WARN Cuda failure 'an illegal memory access was encountered'",
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # NCCL 2.4 src/bootstrap.cc: bootstrapNetInit
    "nccl24-no-interface": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4711 [0] bootstrap.cc:37 NCCL WARN Bootstrap : no socket interface found",
            "NCCL's bootstrap found no network interface to use:",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    # NCCL 2.10 src/proxy.cc: the proxy service's failed operation
    "nccl210-timeout-proxy": (
        "mpi-comm",
        (
            "gpu-node-1:4711:4799 [0] proxy.cc:506 NCCL WARN [Proxy Service 1] Failed to execute operation Connect from rank 1, retcode 3",
            "NCCL's proxy service thread closed a peer's connection after",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
}

# PyTorch 1.x's c10d (torch/lib/c10d/ProcessGroupNCCL.cpp's NCCL_CHECK with ncclGetErrorString, its watchdog
# and blocking wait, ProcessGroupGloo over gloo/transport/tcp/pair.cc, distributed_c10d.py's store barrier,
# rendezvous.py's TCPStore)
_TORCH_1X: Catalog = {
    # PyTorch 1.7 torch/lib/c10d/NCCLUtils.hpp C10D_NCCL_CHECK
    "torch17-unhandled-system": (
        "mpi-comm",
        (
            'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n    dist.barrier()\nRuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1607370172916/work/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled system error, NCCL version 2.7.8',
            "a system call failed (ncclSystemError: sockets, shared memory",
            "Check that NetworkPolicies in team-a allow",
            "pytorch",
        ),
    ),
    # PyTorch 1.4 torch/lib/c10d/ProcessGroupNCCL.cpp (no version suffix yet)
    "torch14-unhandled-system-old": (
        "mpi-comm",
        (
            "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:290, unhandled system error",
            "a system call failed (ncclSystemError: sockets, shared memory",
            "Check that NetworkPolicies in team-a allow",
            "pytorch",
        ),
    ),
    # PyTorch 1.6 NCCLUtils.hpp: ncclUnhandledCudaError, NCCL's own family (a CUDA call inside NCCL)
    "torch16-unhandled-cuda": (
        "mpi-comm",
        (
            "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:784, unhandled cuda error, NCCL version 2.7.8",
            "a CUDA call inside NCCL failed (ncclUnhandledCudaError)",
            "Check that NetworkPolicies in team-a allow",
            "pytorch",
        ),
    ),
    # PyTorch 1.10 NCCLUtils.hpp with NCCL 2.10's ncclRemoteError
    "torch110-remote-error": (
        "mpi-comm",
        (
            "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, remote process exited or there was a network error, NCCL version 2.10.3\nncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
            "a peer rank exited or the network between ranks failed",
            "Find the rank that failed first — its own",
            "pytorch",
        ),
    ),
    # PyTorch 1.8 ProcessGroupNCCL.cpp: the watchdog's timeout
    "torch18-watchdog": (
        "mpi-comm",
        (
            "[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800460 milliseconds before timing out.",
            "collective ALLREDUCE timed out after 30m: a peer rank stopped",
            "Find the rank that failed first — its own",
            "pytorch",
        ),
    ),
    # PyTorch 1.8 ProcessGroupNCCL.cpp: handleNCCLGuard's abort message
    "torch18-taking-down": (
        "mpi-comm",
        (
            "[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we are taking the entire process down.",
            "the NCCL watchdog saw a collective fail or time out",
            "Find the rank that failed first — its own",
            "pytorch",
        ),
    ),
    # PyTorch 1.9 ProcessGroupNCCL.cpp: a WorkNCCL on an aborted communicator
    "torch19-aborted": (
        "mpi-comm",
        (
            "RuntimeError: NCCL communicator was aborted on rank 2.",
            "PyTorch tore down NCCL's communicator after a collective on",
            "NCCL: set NCCL_DEBUG=INFO and",
            "pytorch",
        ),
    ),
    # PyTorch 1.7 ProcessGroupNCCL.cpp: WorkNCCL::wait under NCCL_BLOCKING_WAIT
    "torch17-blocking-wait": (
        "mpi-comm",
        (
            "RuntimeError: [Rank 3] Caught collective operation timeout: WorkNCCL(OpType=BROADCAST, TensorShape=[1024], Timeout(ms)=1800000) ran for 1800123 milliseconds before timing out.",
            "collective BROADCAST timed out after 30m: a peer rank stopped",
            "Find the rank that failed first — its own",
            "pytorch",
        ),
    ),
    # gloo/transport/tcp/pair.cc as PyTorch 1.5 vendored it
    "torch15-gloo-closed": (
        "mpi-comm",
        (
            "RuntimeError: [/opt/conda/conda-bld/pytorch_1591914880026/work/third_party/gloo/gloo/transport/tcp/pair.cc:575] Connection closed by peer [10.0.0.2]:54321",
            "a TCP connection between ranks failed: Connection closed by",
            "Find the rank that failed first — its own",
            "pytorch",
        ),
    ),
    # gloo/transport/tcp/unbound_buffer.cc as PyTorch 1.6 vendored it
    "torch16-gloo-timeout": (
        "mpi-comm",
        (
            "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:84] Timed out waiting 1800000ms for recv operation to complete",
            "a connection or an exchange with another rank timed out",
            "Gloo: pin GLOO_SOCKET_IFNAME to the pod",
            "pytorch",
        ),
    ),
    # PyTorch 1.8 torch/distributed/distributed_c10d.py: _store_based_barrier
    "torch18-store-barrier": (
        "rendezvous",
        (
            "RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: store_based_barrier_key:1 (world_size=4, worker_count=2, timeout=0:30:00)",
            "the processes never all met",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
    # PyTorch 1.4 torch/lib/c10d/TCPStore.cpp via rendezvous.py
    "torch14-connect-timeout": (
        "rendezvous",
        (
            'Traceback (most recent call last):\n  File "/opt/conda/lib/python3.7/site-packages/torch/distributed/rendezvous.py", line 172, in _env_rendezvous_handler\n    store = TCPStore(master_addr, master_port, world_size, start_daemon, timeout)\nRuntimeError: connect() timed out.',
            "the processes never all met",
            "Check that the master replica (rank 0) is",
            "pytorch",
        ),
    ),
    # PyTorch 1.5 torch/lib/c10d/TCPStore.cpp: the master's bind
    "torch15-addr-in-use": (
        "rendezvous",
        (
            '  File "/usr/local/lib/python3.6/dist-packages/torch/distributed/rendezvous.py", line 172, in _env_rendezvous_handler\n    store = TCPStore(master_addr, master_port, world_size, start_daemon, timeout)\nRuntimeError: Address already in use',
            "its port was already in use (another process on the node, or",
            "The master's c10d store could not listen on",
            "pytorch",
        ),
    ),
}

# Horovod 0.16-0.21 (horovod/common/operations.cc's SHUT_DOWN_ERROR, raised by its TensorFlow and PyTorch ops;
# horovod/common/exceptions.py from 0.20; its Gloo controller)
_HOROVOD_OLD: Catalog = {
    # Horovod 0.16 horovod/common/operations.cc through horovod/tensorflow/mpi_ops.cc
    "horovod016-shutdown-tf": (
        "mpi-comm",
        (
            "tensorflow.python.framework.errors_impl.UnknownError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an exception, you should see the exception in the log before the first shutdown message.\n\t [[{{node DistributedAdamOptimizer_Allreduce/HorovodAllreduce_gradients_0}}]]",
            "Horovod shut down because a rank failed or left early",
            "Find the rank that failed first — its own",
            "horovod",
        ),
    ),
    # Horovod 0.19 horovod/torch/mpi_ops.py
    "horovod019-shutdown-torch": (
        "mpi-comm",
        (
            "RuntimeError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution. If the shutdown was caused by an exception, you should see the exception in the log before the first shutdown message.",
            "Horovod shut down because a rank failed or left early",
            "Find the rank that failed first — its own",
            "horovod",
        ),
    ),
    # Horovod 0.21 horovod/common/exceptions.py: HorovodInternalError
    "horovod021-internal": (
        "mpi-comm",
        (
            "horovod.common.exceptions.HorovodInternalError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
            "Horovod shut down because a rank failed or left early",
            "Find the rank that failed first — its own",
            "horovod",
        ),
    ),
    # Horovod 0.20 under horovodrun --gloo: gloo/transport/tcp/pair.cc
    "horovod020-gloo-closed": (
        "mpi-comm",
        (
            "[1,0]<stderr>:RuntimeError: Gloo all-reduce failed: [/tmp/pip-req-build/third_party/gloo/gloo/transport/tcp/pair.cc:575] Connection closed by peer [10.0.0.2]:4242",
            "a TCP connection between ranks failed: Connection closed by",
            "Find the rank that failed first — its own",
            "horovod",
        ),
    ),
    # Horovod 0.18 under mpirun's --tag-output
    "horovod018-mpi-exited": (
        "mpi-comm",
        (
            "[1,2]<stderr>:tensorflow.python.framework.errors_impl.FailedPreconditionError: Horovod has been shut down. This was caused by an exception on one of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks finished execution.",
            "Horovod shut down because a rank failed or left early",
            "Find the rank that failed first — its own",
            "horovod",
        ),
    ),
}

# TensorFlow 1.x (tensorflow/core/common_runtime/bfc_allocator.cc, framework/op_kernel.cc,
# python/framework/errors_impl.py, common_runtime/gpu/gpu_device.cc, stream_executor/cuda/cuda_event.cc and
# cuda_dnn.cc, distributed_runtime/rpc/grpc_util.h)
_TENSORFLOW_1X: Catalog = {
    # TF 1.13 errors_impl.py: ResourceExhaustedError with its report_tensor_allocations_upon_oom hint
    "tf1-oom-allocating": (
        "gpu-oom",
        (
            "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating tensor with shape[32,1024,1024] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node conv2d_3/Conv2D}}]]\nHint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom to RunOptions for current allocation info.",
            "GPU out of memory (TensorFlow: OOM when allocating tensor)",
            "Lower the per-GPU batch size, or use gradient",
            "tensorflow",
        ),
    ),
    # TF 1.4 session.py: '(see above for traceback)'
    "tf14-see-above": (
        "gpu-oom",
        (
            "ResourceExhaustedError (see above for traceback): OOM when allocating tensor with shape[64,256,56,56] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
            "GPU out of memory (TensorFlow: OOM when allocating tensor)",
            "Lower the per-GPU batch size, or use gradient",
            "tensorflow",
        ),
    ),
    # TF 1.12 bfc_allocator.cc then op_kernel.cc's OP_REQUIRES
    "tf1-bfc-ran-out": (
        "gpu-oom",
        (
            "2019-03-01 10:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:267] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.00GiB.  Current allocation summary follows.\n2019-03-01 10:00:00.000100: W tensorflow/core/common_runtime/bfc_allocator.cc:271] ****************************************************************************************************\n2019-03-01 10:00:00.000200: W tensorflow/core/framework/op_kernel.cc:1273] OP_REQUIRES failed at conv_ops.cc:446 : Resource exhausted: OOM when allocating tensor with shape[64,512,28,28] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
            "GPU out of memory (TensorFlow: OOM when allocating tensor)",
            "Lower the per-GPU batch size, or use gradient",
            "tensorflow",
        ),
    ),
    # TF 1.14 common_runtime/gpu/gpu_device.cc: the CUDA context on a GPU another process fills
    "tf1-implicit-init": (
        "gpu-oom",
        (
            "tensorflow.python.framework.errors_impl.InternalError: CUDA runtime implicit initialization on GPU:0 failed. Status: out of memory",
            "GPU out of memory (TensorFlow could not create its CUDA",
            "TensorFlow: another process (or another rank",
            "tensorflow",
        ),
    ),
    # TF 1.12 distributed_runtime/rpc/grpc_util.h: UNAVAILABLE with gRPC's error JSON
    "tf1-grpc-unavailable-os": (
        "mpi-comm",
        (
            'tensorflow.python.framework.errors_impl.UnavailableError: OS Error\nAdditional GRPC error information:\n{"created":"@1551434400.123456789","description":"Error received from peer","file":"external/grpc/src/core/lib/surface/call.cc","file_line":1039,"grpc_message":"OS Error","grpc_status":14}',
            "TensorFlow's gRPC channel to another task is UNAVAILABLE:",
            "TensorFlow: check TF_CONFIG's cluster",
            "tensorflow",
        ),
    ),
    # TF 1.13 grpc_util.h: UNAVAILABLE, socket closed
    "tf1-grpc-socket-closed": (
        "mpi-comm",
        (
            'tensorflow.python.framework.errors_impl.UnavailableError: Socket closed\nAdditional GRPC error information:\n{"created":"@1551434400.123","description":"Error received from peer","grpc_message":"Socket closed","grpc_status":14}',
            "TensorFlow's gRPC channel to another task is UNAVAILABLE:",
            "TensorFlow: check TF_CONFIG's cluster",
            "tensorflow",
        ),
    ),
    # TF 1.12 stream_executor/cuda/cuda_event.cc then gpu_event_mgr.cc
    "tf1-event-illegal": (
        "gpu-error",
        (
            "2019-03-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_event.cc:29] Error polling for event status: failed to query event: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered\n2019-03-01 10:00:00.000100: F tensorflow/core/common_runtime/gpu/gpu_event_mgr.cc:273] Unexpected Event status: 1",
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "tensorflow",
        ),
    ),
    # TF 1.10 stream_executor/cuda/cuda_dnn.cc's status check
    "tf1-cudnn-launch": (
        "gpu-error",
        (
            "2019-03-01 10:00:00.000000: E tensorflow/stream_executor/cuda/cuda_dnn.cc:82] CUDNN_STATUS_EXECUTION_FAILED\nin tensorflow/stream_executor/cuda/cuda_dnn.cc(1023): 'cudnnConvolutionForward( cudnn.handle(), alpha, input_nd.handle(), input_data.opaque(), filter.handle(), filter_data.opaque(), conv.handle(), algo_desc.algo_id(), scratch_memory.opaque(), scratch_memory.size(), beta, output_nd.handle(), output_data->opaque())'",
            "a cuDNN routine's GPU kernel failed to run",
            "cuDNN: rerun with CUDA_LAUNCH_BLOCKING=1 so",
            "tensorflow",
        ),
    ),
}

# older CUDA runtime strings as PyTorch 0.4-1.x printed them (aten/src/THC's THCudaCheck and its 'cuda runtime
# error (N) : <cudaGetErrorString>' form, c10's CUDA_CHECK, cuBLAS / cuDNN status names)
_CUDA_OLD: Catalog = {
    # PyTorch 1.0 aten/src/THC/THCGeneral.cpp: THCudaCheck on cudaErrorMemoryAllocation (2)
    "thc-oom": (
        "gpu-oom",
        (
            "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # PyTorch 1.0 THCGeneral.cpp: THCudaCheck's FAIL warning form
    "thccheck-oom": (
        "gpu-oom",
        (
            "THCudaCheck FAIL file=/pytorch/aten/src/THC/THCCachingAllocator.cpp line=510 error=2 : out of memory",
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # PyTorch 1.0 THCTensorIndex.cu's assert then THC's error 59
    "thc-device-assert": (
        "gpu-error",
        (
            "/pytorch/aten/src/THC/THCTensorIndex.cu:362: void indexSelectLargeIndex(TensorInfo<T, IndexType>, TensorInfo<T, IndexType>, TensorInfo<long, IndexType>, int, int, IndexType, IndexType, long) [with T = float, IndexType = unsigned int, DstDim = 2, SrcDim = 2, IdxDim = -2, IndexIsMajor = true]: block: [214,0,0], thread: [63,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\nRuntimeError: cuda runtime error (59) : device-side assert triggered at /pytorch/aten/src/THC/generic/THCTensorMath.cu:26",
            "an assertion failed inside a GPU kernel (device-side assert),",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # PyTorch 1.0 THCCachingHostAllocator.cpp: error 77
    "thc-illegal": (
        "gpu-error",
        (
            "RuntimeError: cuda runtime error (77) : an illegal memory access was encountered at /pytorch/aten/src/THC/THCCachingHostAllocator.cpp:278",
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # PyTorch 1.5 c10/cuda/CUDACachingAllocator.cpp (its 'reserved in total by PyTorch' form)
    "torch1-cuda-oom-old": (
        "gpu-oom",
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity; 14.24 GiB already allocated; 2.75 MiB free; 14.68 GiB reserved in total by PyTorch)",
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # PyTorch 1.0 THCCachingAllocator.cpp (its 'cached' form)
    "torch10-cuda-oom-oldest": (
        "gpu-oom",
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 1.50 GiB (GPU 0; 11.17 GiB total capacity; 9.85 GiB already allocated; 613.81 MiB free; 422.13 MiB cached)",
            "CUDA out of memory",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # PyTorch 1.6 aten/src/ATen/cuda/CublasHandlePool.cpp
    "torch1-cublas-alloc": (
        "gpu-oom",
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`",
            "GPU out of memory (cuBLAS could not allocate its workspace)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # PyTorch 1.6 aten/src/ATen/cuda/CUDABlas.cpp
    "torch1-cublas-exec": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc)`",
            "a cuBLAS routine's GPU kernel failed to run",
            "cuBLAS: rerun with CUDA_LAUNCH_BLOCKING=1 so",
            "pytorch",
        ),
    ),
    # PyTorch 1.5 aten/src/ATen/cudnn/Exceptions.h
    "torch1-cudnn-exec": (
        "gpu-error",
        (
            "RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
            "a cuDNN routine's GPU kernel failed to run",
            "cuDNN: rerun with CUDA_LAUNCH_BLOCKING=1 so",
            "pytorch",
        ),
    ),
    # PyTorch 1.5 c10/cuda/CUDAException.h
    "torch1-launch-failure": (
        "gpu-error",
        (
            "RuntimeError: CUDA error: unspecified launch failure",
            "a GPU kernel crashed (unspecified launch failure)",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # PyTorch 1.0 THCGeneral.cpp: cudaErrorInsufficientDriver (35)
    "cuda9-driver-insufficient": (
        "gpu-error",
        (
            "RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at /pytorch/aten/src/THC/THCGeneral.cpp:51",
            "the CUDA runtime the program was built with needs a newer",
            "Driver: nvidia-smi on the node shows the",
            "pytorch",
        ),
    ),
    # PyTorch 1.0 THCGeneral.cpp: cudaErrorUnknown (30)
    "cuda-no-device-30": (
        "gpu-error",
        (
            "RuntimeError: cuda runtime error (30) : unknown error at /pytorch/aten/src/THC/THCGeneral.cpp:87",
            "the CUDA driver returned an unknown error (cudaErrorUnknown),",
            "cudaErrorUnknown: look for an Xid or a GPU",
            "pytorch",
        ),
    ),
}

# Open MPI 1.10-3.x, the ORTE era (orte/mca/plm/base/help-plm-base.txt, orte/mca/errmgr/.../help-errmgr-
# base.txt, ompi/mca/bml/r2/help-mca-bml-r2.txt, ompi/runtime/help-mpi-runtime.txt,
# ompi/mca/btl/tcp/btl_tcp_endpoint.c and btl_tcp_frag.c, ompi/mca/btl/openib/btl_openib_component.c and help-
# mpi-btl-openib.txt, opal/mca/btl/vader's help text, ompi/errhandler/errhandler_predefined.c,
# opal/util/stacktrace.c)
_OPEN_MPI_ORTE: Catalog = {
    # Open MPI 2.1 orte/mca/errmgr/default_hnp/help-errmgr-base.txt: node-died
    "orte-lost-daemon": (
        "mpi-comm",
        (
            "--------------------------------------------------------------------------\nORTE has lost communication with a remote daemon.\n\n  HNP daemon   : [[12345,0],0] on node gpu-node-0\n  Remote daemon: [[12345,0],1] on node gpu-node-1\n\nThis is usually due to either a failure of the TCP network\nconnection to the node, or possibly an internal failure of\nthe daemon itself. We cannot recover from this failure, and\ntherefore will terminate the job.\n--------------------------------------------------------------------------",
            "workers unreachable: lost the MPI daemon on gpu-node-1; check",
            "Check that NetworkPolicies in team-a let the",
            "mpi",
        ),
    ),
    # Open MPI 3.0 orte/mca/plm/base/help-plm-base.txt
    "orte-daemon-failed-after-launch": (
        "mpi-comm",
        (
            "--------------------------------------------------------------------------\nAn ORTE daemon has unexpectedly failed after launch and before\ncommunicating back to mpirun. This could be caused by a number\nof factors, including an inability to create a connection back\nto mpirun due to a lack of common network interfaces and/or no\nroute found between them. Please check network connectivity\n(including firewalls and network routing requirements).\n--------------------------------------------------------------------------",
            "an MPI daemon failed after launch, before it reached mpirun;",
            "Check that NetworkPolicies in team-a let the",
            "mpi",
        ),
    ),
    # Open MPI 1.10 orte/mca/plm/rsh/help-plm-rsh.txt
    "orte-unable-to-start": (
        "mpi-comm",
        (
            "--------------------------------------------------------------------------\nORTE was unable to reliably start one or more daemons.\nThis usually is caused by:\n\n* not finding the required libraries and/or binaries on\n  one or more nodes. Please check your PATH and LD_LIBRARY_PATH\n  settings, or configure OMPI with --enable-orterun-prefix-by-default\n\n* lack of authority to execute on one or more specified nodes.\n  Please verify your allocation and authorities.\n\n* the inability to write startup files into /tmp (--tmpdir/orte_tmpdir_base).\n  Please check with your sys admin to determine the correct location to use.\n--------------------------------------------------------------------------",
            "workers unreachable: MPI daemons did not start on the",
            "Check that NetworkPolicies in team-a let the",
            "mpi",
        ),
    ),
    # Open MPI 1.10 ompi/mca/bml/r2/help-mca-bml-r2.txt: unreachable proc
    "ompi1-unreachable": (
        "mpi-comm",
        (
            '--------------------------------------------------------------------------\nAt least one pair of MPI processes are unable to reach each other for\nMPI communications.  This means that no Open MPI device has indicated\nthat it can be used to communicate between these processes.  This is\nan error; Open MPI requires that all MPI processes be able to reach\neach other.  This error can sometimes be the result of forgetting to\nspecify the "self" BTL.\n\n  Process 1 ([[12345,1],0]) is on host: gpu-node-0\n  Process 2 ([[12345,1],3]) is on host: gpu-node-1\n  BTLs attempted: self tcp\n\nYour MPI job is now going to abort; sorry.\n--------------------------------------------------------------------------',
            "another rank's host could not be reached (no route, an",
            "Open MPI: rerun with --mca plm_base_verbose 5",
            "mpi",
        ),
    ),
    # Open MPI 2.1 ompi/mca/btl/tcp/btl_tcp_endpoint.c
    "btl-tcp-connect": (
        "mpi-comm",
        (
            "[gpu-node-1][[12345,1],3][btl_tcp_endpoint.c:800:mca_btl_tcp_endpoint_complete_connect] connect() to 10.0.0.2 failed: Connection refused (111)",
            "a connection to another rank was refused: nothing listened on",
            "Open MPI: rerun with --mca plm_base_verbose 5",
            "mpi",
        ),
    ),
    # Open MPI 2.1 ompi/mca/btl/tcp/btl_tcp_frag.c
    "btl-tcp-readv": (
        "mpi-comm",
        (
            "[gpu-node-1][[12345,1],3][btl_tcp_frag.c:237:mca_btl_tcp_frag_recv] mca_btl_tcp_frag_recv: readv failed: Connection reset by peer (104)",
            "a TCP connection to another rank failed (the peer process",
            "Check that NetworkPolicies in team-a allow",
            "mpi",
        ),
    ),
    # Open MPI 1.10 btl_openib_component.c: handle_wc
    "btl-openib-retry": (
        "mpi-comm",
        (
            "[[12345,1],3][btl_openib_component.c:3644:handle_wc] from gpu-node-1 to: gpu-node-2 error polling LP CQ with status RETRY EXCEEDED ERROR status number 12 for wr_id 1a2b3c opcode 0  vendor error 129 qp_idx 0",
            "an InfiniBand work completion failed: the peer or the link",
            "Check the InfiniBand / RoCE fabric of the",
            "mpi",
        ),
    ),
    # Open MPI 1.10 help-mpi-btl-openib.txt: pp retry exceeded
    "btl-openib-retry-help": (
        "mpi-comm",
        (
            '--------------------------------------------------------------------------\nThe InfiniBand retry count between two MPI processes has been\nexceeded.  "Retry count" is defined in the InfiniBand spec 1.2\n(section 12.7.38):\n\n    The total number of times that the sender wishes the receiver to\n    retry timeout, packet sequence, etc. errors before posting a\n    completion error.\n\nThis error typically means that there is something awry within the\nInfiniBand fabric itself.\n\n  Local host:   gpu-node-1\n  Local device: mlx5_0\n  Peer host:    gpu-node-2\n--------------------------------------------------------------------------',
            "a connection or an exchange with another rank timed out",
            "Open MPI: rerun with --mca plm_base_verbose 5",
            "mpi",
        ),
    ),
    # Open MPI 1.10 ompi/runtime/help-mpi-runtime.txt: mpi_init:startup:internal-failure
    "ompi1-init-failed": (
        "mpi-comm",
        (
            '--------------------------------------------------------------------------\nIt looks like MPI_INIT failed for some reason; your parallel process is\nlikely to abort.  There are many reasons that a parallel process can\nfail during MPI_INIT; some of which are due to configuration or environment\nproblems.  This failure appears to be an internal failure; here\'s some\nadditional information (which may only be relevant to an Open MPI\ndeveloper):\n\n  PML add procs failed\n  --> Returned "Unreachable" (-12) instead of "Success" (0)\n--------------------------------------------------------------------------',
            "another rank's host could not be reached (no route, an",
            "Open MPI: rerun with --mca plm_base_verbose 5",
            "mpi",
        ),
    ),
    # Open MPI 2.1 errhandler_predefined.c with MPI_ERR_TRUNCATE: the ranks disagree on a message, the family
    # the first pass gave it
    "ompi2-errors-fatal": (
        "mpi-comm",
        (
            "[gpu-node-1:04711] *** An error occurred in MPI_Allreduce\n[gpu-node-1:04711] *** reported by process [3456106497,3]\n[gpu-node-1:04711] *** on communicator MPI_COMM_WORLD\n[gpu-node-1:04711] *** MPI_ERR_TRUNCATE: message truncated\n[gpu-node-1:04711] *** MPI_ERRORS_ARE_FATAL (processes in this communicator will now abort,\n[gpu-node-1:04711] ***    and potentially your MPI job)",
            "a rank received a message longer than the buffer it posted",
            "Every rank must call the collective with the",
            "mpi",
        ),
    ),
    # Open MPI 1.10 orte/tools/orterun/help-orterun.txt: MPI_ABORT
    "ompi1-abort": (
        "mpi-abort",
        (
            "--------------------------------------------------------------------------\nMPI_ABORT was invoked on rank 2 in communicator MPI_COMM_WORLD\nwith errorcode 1.\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI processes.\nYou may or may not see output from other processes, depending on\nexactly when Open MPI kills them.\n--------------------------------------------------------------------------",
            "Rank 2 on worker-0 aborted (exit 1)",
            "Read the failing rank's own error above the",
            "mpi",
        ),
    ),
    # Open MPI 1.10 help-orterun.txt: orterun:proc-exit-no-sync
    "ompi1-exiting-improperly": (
        "mpi-abort",
        (
            '--------------------------------------------------------------------------\nmpirun has exited due to process rank 2 with PID 4711 on\nnode gpu-node-1 exiting improperly. There are three reasons this could occur:\n\n1. this process did not call "init" before exiting, but others in\nthe job did. This can cause a job to hang indefinitely while it waits\nfor all processes to call "init". By rule, if one process calls "init",\nthen ALL processes must call "init" prior to termination.\n--------------------------------------------------------------------------',
            "Rank 2 on worker-1 exited improperly (without MPI_Finalize,",
            "Read the failing rank's own error above the",
            "mpi",
        ),
    ),
    # Open MPI 3.0 opal/mca/btl/vader/help-btl-vader.txt: sys call fail, ENOSPC on its backing file (the
    # disk's family)
    "ompi3-vader-shm": (
        "disk-full",
        (
            "--------------------------------------------------------------------------\nA system call failed during shared memory initialization that should\nnot have.  It is likely that your MPI job will now either abort or\nexperience performance degradation.\n\n  Local host:  gpu-node-1\n  System call: open(2) \n  Error:       No space left on device (errno 28)\n--------------------------------------------------------------------------",
            "no space left on device",
            "See which filesystem is full: kubectl -n",
            "mpi",
        ),
    ),
    # Open MPI 1.10 opal/util/stacktrace.c
    "ompi1-segv-handler": (
        "segfault",
        (
            "[gpu-node-1:04711] *** Process received signal ***\n[gpu-node-1:04711] Signal: Segmentation fault (11)\n[gpu-node-1:04711] Signal code: Address not mapped (1)\n[gpu-node-1:04711] Failing at address: 0x10\n[gpu-node-1:04711] [ 0] /lib64/libpthread.so.0(+0xf5d0)[0x7f12a3b4c5d0]\n[gpu-node-1:04711] *** End of error message ***",
            "Worker 0 crashed with a segmentation fault (SIGSEGV)",
            "Read the backtrace after the signal in the",
            "mpi",
        ),
    ),
}

# the kernel lines node-problem-detector's kernel monitor matches (config/kernel-monitor.json: OOMKilling's
# 'Killed process … total-vm' in each kernel's wording) and the NVIDIA driver's Xid lines (its GPU monitor's,
# the driver's NVRM: Xid format)
_NODE_KERNEL: Catalog = {
    # Linux 5.x mm/oom_kill.c as kernel-monitor.json's OOMKilling pattern reads it
    "npd-oom-killed-process": (
        "oom",
        (
            "[12345.678901] Memory cgroup out of memory: Killed process 4711 (python) total-vm:82345612kB, anon-rss:61234567kB, file-rss:1234kB, shmem-rss:0kB, UID:0 pgtables:123456kB oom_score_adj:936",
            "out of memory (limit 16Gi; the kernel killed python)",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    # Linux 4.x mm/oom_kill.c: 'Kill process … or sacrifice child'
    "npd-oom-kill-process-old": (
        "oom",
        (
            "[12345.678901] Memory cgroup out of memory: Kill process 4711 (python) score 1989 or sacrifice child\n[12345.678905] Killed process 4711 (python) total-vm:82345612kB, anon-rss:61234567kB, file-rss:1234kB",
            "out of memory (limit 16Gi; the kernel killed python)",
            "Raise the memory limit of the role that",
            "other",
        ),
    ),
    # NVIDIA driver's Xid 79
    "xid79-fell-off": (
        "gpu-error",
        (
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=4711, GPU has fallen off the bus.",
            "Xid 79: the GPU has fallen off the bus and no longer answers",
            "Take the node out of service and report it to",
            "pytorch",
        ),
    ),
    # NVIDIA driver's Xid 48
    "xid48-dbe": (
        "gpu-error",
        (
            "NVRM: Xid (PCI:0000:3b:00): 48, pid=4711, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
            "Xid 48: double-bit ECC error: the GPU's memory is failing",
            "Take the node out of service and report it to",
            "pytorch",
        ),
    ),
    # NVIDIA driver's Xid 31
    "xid31-mmu": (
        "gpu-error",
        (
            "NVRM: Xid (PCI:0000:3b:00): 31, pid=4711, Ch 00000010, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f12_34560000. Fault is of type FAULT_PDE ACCESS_TYPE_READ",
            "Xid 31: GPU memory page fault, usually an illegal memory",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # NVIDIA driver's Xid 13
    "xid13-warp": (
        "gpu-error",
        (
            "NVRM: Xid (PCI:0000:3b:00): 13, pid=4711, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
            "Xid 13: graphics engine exception, usually an illegal access",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # NVIDIA driver's Xid 74
    "xid74-nvlink": (
        "gpu-error",
        (
            "NVRM: Xid (PCI:0000:3b:00): 74, pid=4711, NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
            "Xid 74: NVLink error: a link between GPUs failed",
            "Take the node out of service and report it to",
            "pytorch",
        ),
    ),
}

# managed training services' failure reasons and the provisioners' capacity refusals as a program printed them
# (Amazon SageMaker's CreateTrainingJob error, AWS Batch's statusReason, Vertex AI's job error, Azure ML's
# compute and job errors, Kueue's pkg/scheduler/flavorassigner, GCE's quotaExceeded as the cluster autoscaler
# logs it, EC2's VcpuLimitExceeded under Karpenter, Azure's compute provider)
_MANAGED: Catalog = {
    # SageMaker API: ResourceLimitExceeded
    "sagemaker-resource-limit": (
        "quota",
        (
            "ClientError: An error occurred (ResourceLimitExceeded) when calling the CreateTrainingJob operation: The account-level service limit 'ml.p4d.24xlarge for training job usage' is 0 Instances, with current utilization of 0 Instances and a request delta of 1 Instances. Please use AWS Service Quotas to request an increase for this quota. If AWS Service Quotas is not available, contact AWS support to request an increase for this quota.",
            "the AWS account's limit 'ml.p4d.24xlarge for training job",
            "The limit is the AWS account's, per region:",
            "other",
        ),
    ),
    # AWS Batch docs, job statusReason
    "batch-oom": (
        "oom",
        (
            "statusReason: OutOfMemoryError: Container killed due to memory usage",
            "out of memory (limit 16Gi; the kernel (as AWS Batch reported",
            "AWS Batch: raise the job definition's memory",
            "other",
        ),
    ),
    # Vertex AI docs: a replica's out-of-memory job error
    "vertex-oom": (
        "oom",
        (
            "The replica workerpool0-0 ran out of memory and exited with a non-zero status of 9(SIGKILL). To find out more about why your job exited please check the logs: https://console.cloud.google.com/logs/viewer?project=1234",
            "node gpu-node-0 ran out of memory (the kernel (as Vertex AI",
            "Vertex AI: give the worker pool a machine",
            "other",
        ),
    ),
    # Vertex AI: quota metrics error
    "vertex-quota": (
        "quota",
        (
            "The following quota metrics exceed quota limits: aiplatform.googleapis.com/custom_model_training_nvidia_a100_gpus",
            "the project's quota",
            "The quota is the Google Cloud project's, per",
            "other",
        ),
    ),
    # Azure ML compute resize error
    "azureml-quota": (
        "quota",
        (
            "Resize operation failed. Operation results in exceeding quota limits of Core. Maximum allowed: 24, Current in use: 24, Additional requested: 24.",
            "the subscription's Core quota allows 24, 24 in use and 24",
            "The quota is the Azure subscription's, per",
            "other",
        ),
    ),
    # Azure ML error code DiskFullError
    "azureml-disk-full": (
        "disk-full",
        (
            "DiskFullError: Disk full while running job. Please consider reducing amount of data accessed, or upgrading VM SKU with higher memory.",
            "Azure ML's compute node ran out of disk while running the job",
            "Azure ML: the job's data and outputs filled",
            "other",
        ),
    ),
    # Kueue pkg/scheduler/flavorassigner/flavorassigner.go
    "kueue-insufficient": (
        "quota",
        (
            "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100, request > maximum capacity (16 > 8)",
            "Kueue could not fit pod set main in any flavor of its",
            "See what the ClusterQueue has and lends:",
            "kubernetes",
        ),
    ),
    # Kueue flavorassigner.go: 'insufficient unused quota'
    "kueue-unused": (
        "quota",
        (
            "couldn't assign flavors to pod set worker: insufficient unused quota for nvidia.com/gpu in flavor a100, 4 more needed",
            "Kueue could not fit pod set worker in any flavor of its",
            "See what the ClusterQueue has and lends:",
            "kubernetes",
        ),
    ),
    # Compute Engine API 403 quotaExceeded as cluster-autoscaler's gce cloud provider logs it
    "gce-quota-exceeded": (
        "quota",
        (
            "googleapi: Error 403: Quota 'NVIDIA_A100_GPUS' exceeded.  Limit: 16.0 in region us-central1., quotaExceeded",
            "the cloud refused what the cluster asked it for (Worker 0",
            "The quota is the cloud project's, not the",
            "kubernetes",
        ),
    ),
    # Karpenter's JSON log on EC2's VcpuLimitExceeded
    "karpenter-vcpu": (
        "quota",
        (
            '{"level":"ERROR","time":"2026-11-29T08:01:02.123Z","logger":"controller","message":"could not launch nodeclaim","error":"creating instance, VcpuLimitExceeded: You have requested more vCPU capacity than your current vCPU limit of 32 allows for the instance bucket that the specified instance type belongs to."}',
            "the AWS account's vCPU limit of 32 for that instance family",
            "The limit is the AWS account's, per region",
            "kubernetes",
        ),
    ),
    # Azure Compute provider's OperationNotAllowed as az prints it
    "azure-approved-cores": (
        "quota",
        (
            "ERROR: (OperationNotAllowed) Operation could not be completed as it results in exceeding approved standardNCADSA100v4Family Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, Current Limit: 24, Current Usage: 0, Additional Required: 96, (Minimum) New Limit Required: 96.",
            "the subscription's standardNCADSA100v4Family quota allows 24,",
            "The quota is the Azure subscription's, per",
            "kubernetes",
        ),
    ),
}

# AMD ROCm beyond the first pass (ROCr's runtime/hsa-runtime/core/runtime/runtime.cc memory fault, the amdgpu
# kernel driver's gmc page fault and amdgpu_job.c ring timeout, ROCclr's device/rocm/rocdevice.cpp
# callbackQueue, c10/hip's messages, HIP's hipErrorNoBinaryForGpu, rocBLAS's Tensile host)
_AMD: Catalog = {
    # ROCr runtime.cc: VMFaultHandler
    "rocr-mem-fault": (
        "gpu-error",
        (
            "Memory access fault by GPU node-2 (Agent handle: 0x55f6c0a1b2c0) on address 0x7f1234560000. Reason: Page not present or supervisor privilege.",
            "a GPU kernel accessed memory it does not own (ROCm's memory",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # amdgpu gmc_v9_0.c: gmc_v9_0_process_interrupt
    "amdgpu-page-fault": (
        "gpu-error",
        (
            "[12345.678901] amdgpu 0000:03:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:8 pasid:32769, for process python pid 4711 thread python pid 4711)",
            "the amdgpu driver reported a GPU page fault: a kernel",
            "AMD GPU: rerun with AMD_SERIALIZE_KERNEL=3",
            "pytorch",
        ),
    ),
    # amdgpu amdgpu_job.c: amdgpu_job_timedout
    "amdgpu-ring-timeout": (
        "gpu-error",
        (
            "[12345.678901] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx timeout, signaled seq=1234, emitted seq=1236\n[12345.678950] amdgpu 0000:03:00.0: amdgpu: GPU reset begin!",
            "the amdgpu driver found a job on a GPU ring that never",
            "AMD GPU: the driver reset the GPU after a job",
            "pytorch",
        ),
    ),
    # ROCclr rocdevice.cpp: callbackQueue with HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION
    "hsa-aperture": (
        "gpu-error",
        (
            ":0:rocdevice.cpp            :2672: 123456789 us: 4711: [tid:0x7f12] Device::callbackQueue aborting with error : HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal address. code: 0x29",
            "a GPU kernel accessed memory it does not own (ROCm's memory",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # ROCclr rocdevice.cpp: callbackQueue with HSA_STATUS_ERROR_EXCEPTION
    "hsa-exception": (
        "gpu-error",
        (
            ":0:rocdevice.cpp            :2672: 123456789 us: 4711: [tid:0x7f12] Device::callbackQueue aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. code: 0x1016",
            "the GPU raised a hardware exception (ROCm's runtime: a GPU",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # PyTorch on ROCm: c10/cuda/CUDACachingAllocator.cpp hipified
    "hip-oom": (
        "gpu-oom",
        (
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 63.98 GiB of which 1.02 GiB is free. Of the allocated memory 60.12 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but unallocated.",
            "GPU out of memory (ROCm: HIP out of memory)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # PyTorch on ROCm: c10/cuda/CUDAException.h hipified
    "hip-illegal": (
        "gpu-error",
        (
            "RuntimeError: HIP error: an illegal memory access was encountered\nHIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing AMD_SERIALIZE_KERNEL=3",
            "illegal memory access: a GPU kernel read or wrote memory it",
            "Rerun with CUDA_LAUNCH_BLOCKING=1 so the",
            "pytorch",
        ),
    ),
    # HIP hip_code_object.cpp: no code object for the device's gfx target
    "hip-no-binary": (
        "gpu-error",
        (
            '"hipErrorNoBinaryForGpu: Unable to find code object for all current devices!"\nAborted (core dumped)',
            "the program's GPU code was not built for this GPU's",
            "Architecture: the build's targets",
            "pytorch",
        ),
    ),
    # rocBLAS library/src/tensile_host.cpp
    "rocblas-no-devices": (
        "gpu-error",
        (
            "rocBLAS error: Could not initialize Tensile host: No devices found",
            "the process saw no usable accelerator: the device plugin gave",
            "No accelerator visible: check the pod asked",
            "pytorch",
        ),
    ),
}

# the other accelerators' runtimes (Intel: PyTorch's XPU allocator, intel-extension-for-pytorch, the unified
# runtime's and Level Zero's result names, compute-runtime's abort; Habana: the Gaudi bridge's PT_DEVMEM and
# SynapseAI's synStatus; AWS Neuron: its runtime's TDRV and NRT; XLA's TPU runtime and compiler)
_OTHER_ACCELERATORS: Catalog = {
    # PyTorch 2.5 c10/xpu/XPUCachingAllocator.cpp
    "xpu-oom": (
        "gpu-oom",
        (
            "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 64.00 GiB. Of the allocated memory 60.12 GiB is allocated by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.",
            "accelerator out of memory (PyTorch's XPU / NPU allocator)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # intel-extension-for-pytorch 1.13 csrc/gpu/runtime/CachingDeviceAllocator.cpp
    "ipex-oom-old": (
        "gpu-oom",
        (
            "RuntimeError: XPU out of memory. Tried to allocate 2.00 GiB (GPU 0; 64.00 GiB total capacity; 60.12 GiB already allocated; 61.00 GiB reserved in total by PyTorch)",
            "accelerator out of memory (PyTorch's XPU / NPU allocator)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # oneAPI unified runtime: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY as SYCL's backend error
    "ze-oom": (
        "gpu-oom",
        (
            "RuntimeError: level_zero backend failed with error: 70000004 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
            "Intel GPU out of memory (Level Zero / SYCL: the device",
            "Intel GPU: lower the batch size, check",
            "pytorch",
        ),
    ),
    # oneAPI unified runtime: UR_RESULT_ERROR_DEVICE_LOST
    "ze-device-lost": (
        "gpu-error",
        (
            "RuntimeError: level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
            "the Intel GPU was lost (Level Zero's DEVICE_LOST: the GPU",
            "Intel GPU: check the node's kernel log for",
            "pytorch",
        ),
    ),
    # DPC++ SYCL plugin interface: PI_ERROR_OUT_OF_RESOURCES on a device allocation
    "pi-oor": (
        "gpu-oom",
        (
            "RuntimeError: Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) -5 (PI_ERROR_OUT_OF_RESOURCES)",
            "Intel GPU out of memory (Level Zero / SYCL: the device",
            "Intel GPU: lower the batch size, check",
            "pytorch",
        ),
    ),
    # Intel compute-runtime shared/source/os_interface/linux/drm_neo.cpp
    "ze-result-lost": (
        "gpu-error",
        (
            "Abort was called at 62 line in file:\n./shared/source/os_interface/linux/drm_neo.cpp\nZE_RESULT_ERROR_DEVICE_LOST",
            "the Intel GPU was lost (Level Zero's DEVICE_LOST: the GPU",
            "Intel GPU: check the node's kernel log for",
            "pytorch",
        ),
    ),
    # Habana PyTorch bridge: PT_DEVMEM allocator
    "habana-devmem": (
        "gpu-oom",
        (
            "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::4294967296 (4096)MB",
            "HPU out of memory (Habana Gaudi's device memory)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # SynapseAI synStatus 8, synDeviceNotFound
    "habana-acquire": (
        "gpu-error",
        (
            "RuntimeError: synStatus=8 [Device not found] Device acquire failed.",
            "the process saw no usable accelerator: the device plugin gave",
            "No accelerator visible: check the pod asked",
            "pytorch",
        ),
    ),
    # AWS Neuron runtime: TDRV dmem_alloc_internal
    "neuron-dmem": (
        "gpu-oom",
        (
            "2024-Jan-01 10:00:00.0000  4711:4711  ERROR  TDRV:dmem_alloc_internal                    Failed to alloc DEVICE memory: 67108864\n2024-Jan-01 10:00:00.0001  4711:4711  ERROR  NRT:nrt_allocate_neuron_cores               Failed to allocate 67108864 bytes for the model",
            "NeuronCore out of memory (AWS Neuron's driver layer, TDRV,",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # torch-neuronx over NRT: nrt_tensor_allocate's NRT_RESOURCE
    "neuron-hbm-oom": (
        "gpu-oom",
        (
            'RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: nrt_tensor_allocate status=4 message="Allocation Failure"',
            "NeuronCore out of memory (AWS Neuron runtime: NRT_RESOURCE)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
    # XLA's TPU compiler: memory space hbm
    "xla-tpu-hbm": (
        "gpu-oom",
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm. Used 17.12G of 15.48G hbm. Exceeded hbm capacity by 1.64G.",
            "TPU out of memory (XLA ran out of its HBM / VMEM)",
            "Lower the per-GPU batch size, or use gradient",
            "jax",
        ),
    ),
    # the TPU runtime: device buffer allocation
    "xla-device-buffer": (
        "gpu-oom",
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: Attempting to allocate 2.00G. That was not possible. There are 1.23G free.; (0x0x0_HBM0)",
            "TPU out of memory (its runtime could not allocate a device",
            "Lower the per-GPU batch size, or use gradient",
            "jax",
        ),
    ),
    # PyTorch/XLA on TPU: the BFC-style reservation
    "torch-xla-oom": (
        "gpu-oom",
        (
            "RuntimeError: Resource exhausted: Attempting to reserve 6.53G at the bottom of memory. That was not possible. There are 5.41G free, 0B reserved, and 5.41G reservable.",
            "GPU out of memory (JAX/XLA: RESOURCE_EXHAUSTED)",
            "Lower the per-GPU batch size, or use gradient",
            "pytorch",
        ),
    ),
}

_SOURCES: dict[str, Catalog] = {
    "nccl-old": _NCCL_OLD,
    "torch-1x": _TORCH_1X,
    "horovod-old": _HOROVOD_OLD,
    "tensorflow-1x": _TENSORFLOW_1X,
    "cuda-old": _CUDA_OLD,
    "open-mpi-orte": _OPEN_MPI_ORTE,
    "node-kernel": _NODE_KERNEL,
    "managed": _MANAGED,
    "amd": _AMD,
    "other-accelerators": _OTHER_ACCELERATORS,
}


@pytest.mark.parametrize(WORDING_ARGS, catalog_rows(_SOURCES))
def test_an_older_release_or_another_accelerators_message_is_its_familys_with_its_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# the kubelet's eviction manager and admission (pkg/kubelet/eviction/, each resource in each release's
# wording), node-problem-detector's and the kubelet's OOM Events, the sandbox the runtime could not create,
# and the batch queues' refusals, as Events
_EVENTS: dict[str, tuple[RuleId, str, str, str, str]] = {
    # kubelet pkg/kubelet/eviction/helpers.go: memory, 1.21+
    "kubelet-evicted-memory": (
        "oom",
        "Evicted",
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. Container trainer was using 30678544Ki, request is 16Gi, has larger consumption of memory.",
        "its node was low on memory",
        "Set each role's memory request equal to its",
    ),
    # kubelet eviction/helpers.go: memory, before 1.21
    "kubelet-evicted-memory-old": (
        "oom",
        "Evicted",
        "The node was low on resource: memory. Container trainer was using 30678544Ki, which exceeds its request of 16Gi.",
        "its node was low on memory; container trainer used",
        "Set each role's memory request equal to its",
    ),
    # kubelet eviction/helpers.go: ephemeral-storage
    "kubelet-evicted-ephemeral-node": (
        "disk-full",
        "Evicted",
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 8123456Ki. Container trainer was using 52Gi, request is 0, has larger consumption of ephemeral-storage.",
        "the node was low on ephemeral storage (its disk, where",
        "Ephemeral storage is the node's disk under",
    ),
    # kubelet 1.7 eviction: nodefs, the root filesystem's older name
    "kubelet-evicted-nodefs-old": (
        "disk-full",
        "Evicted",
        "The node was low on resource: nodefs. Container trainer was using 52Gi, which exceeds its request of 0.",
        "the node was low on ephemeral storage (its disk, where",
        "Ephemeral storage is the node's disk under",
    ),
    # kubelet pkg/kubelet/eviction/eviction_manager.go: admission under DiskPressure
    "kubelet-evicted-diskpressure": (
        "disk-full",
        "Evicted",
        "The node had condition: [DiskPressure]. ",
        "its node had DiskPressure (its disk nearly full), so the",
        "Ephemeral storage is the node's disk under",
    ),
    # kubelet eviction_manager.go: admission under MemoryPressure
    "kubelet-evicted-memorypressure": (
        "oom",
        "Evicted",
        "The node had condition: [MemoryPressure]. ",
        "its node was low on memory",
        "Set each role's memory request equal to its",
    ),
    # node-problem-detector kernel-monitor.json: OOMKilling
    "npd-oomkilling": (
        "oom",
        "OOMKilling",
        "Memory cgroup out of memory: Killed process 4711 (python) total-vm:82345612kB, anon-rss:61234567kB, file-rss:1234kB, shmem-rss:0kB, UID:0 pgtables:123456kB oom_score_adj:936",
        "node gpu-node-0 ran out of memory (the kernel killed python)",
        "Raise the memory limit of the role that",
    ),
    # kubelet pkg/kubelet/oom/oom_watcher_linux.go: SystemOOM
    "kubelet-systemoom": (
        "oom",
        "SystemOOM",
        "System OOM encountered, victim process: python, pid: 4711",
        "node gpu-node-0 ran out of memory (the kernel killed python)",
        "Raise the memory limit of the role that",
    ),
    # kubelet FailedCreatePodSandBox with containerd's ENOSPC
    "sandbox-no-space": (
        "disk-full",
        "FailedCreatePodSandBox",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: write /sys/fs/cgroup/cgroup.procs: no space left on device: unknown",
        "no space left on device on the node (FailedCreatePodSandBox)",
        "The node's disk (/var/lib/kubelet, the",
    ),
    # Kueue's Pending event
    "kueue-pending": (
        "quota",
        "Pending",
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor a100, request > maximum capacity (16 > 8)",
        "Kueue could not fit pod set main in any flavor of its",
        "See what the ClusterQueue has and lends:",
    ),
    # Volcano pkg/scheduler/plugins/proportion (and capacity): the PodGroup's Unschedulable event
    "volcano-queue-overused": (
        "quota",
        "Unschedulable",
        "queue resource quota insufficient",
        "Volcano's queue has no room left in its quota (capability)",
        "See the queue's capability and what it has",
    ),
    # GKE cluster-autoscaler FailedScaleUp visibility event
    "ca-quota-event": (
        "quota",
        "FailedScaleUp",
        "Node scale up in zones us-central1-a associated with this pod failed: GCE quota exceeded. Pod is at risk of not being scheduled.",
        "GKE's cluster autoscaler could not add a node in",
        "The quota is the cloud project's, not the",
    ),
}


@pytest.mark.parametrize(
    ("rule", "reason", "text", "said", "step"),
    [pytest.param(*row, id=key) for key, row in _EVENTS.items()],
)
def test_a_nodes_or_a_queues_event_is_its_familys(
    rule: RuleId, reason: str, text: str, said: str, step: str
) -> None:
    fires_saying(text, rule, said, step, stack="pytorch", where="event", reason=reason)


def test_the_catalogs_reach_every_rule() -> None:
    """The rows cover each rule a message of these catalogs reaches, under one id each."""
    rules = {rule for table in _SOURCES.values() for rule, _ in table.values()}
    rules |= {row[0] for row in _EVENTS.values()}
    assert rules == set(TEXT_RULES)
    keys = [key for table in _SOURCES.values() for key in table]
    assert len(keys) == len(set(keys))


# the same catalogs' lines that report no failure of these rules: INFO, a retry or a fallback the run went
# on after, a setting echoed, a corrected error, a hung task or a filesystem error with no disk full
_QUIET: dict[str, tuple[str, str]] = {
    # Karpenter: an offering with no capacity, then the nodeclaim launched on another (it retries)
    "karpenter-ice-retried": (
        '{"level":"ERROR","time":"2026-11-29T08:01:02.123Z","logger":"controller","message":"failed launching nodeclaim","error":"creating instance, insufficient capacity, with fleet error(s), InsufficientInstanceCapacity: We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a)."}\n{"level":"INFO","time":"2026-11-29T08:01:40.456Z","logger":"controller","message":"launched nodeclaim","instance-type":"p4de.24xlarge","zone":"us-east-1b"}',
        "kubernetes",
    ),
    # NCCL src/include/socket.h: a connect it retries
    "nccl-retrying": (
        "gpu-node-1:4711:4790 [0] NCCL INFO Call to connect returned Connection refused, retrying",
        "pytorch",
    ),
    # NCCL net_ib.cc: no IB device, then its socket transport
    "nccl-ib-no-device": (
        "gpu-node-1:4711:4711 [0] NCCL INFO NET/IB : No device found.\ngpu-node-1:4711:4711 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>",
        "pytorch",
    ),
    # NCCL src/net.cc: no external net plugin
    "nccl-no-plugin": (
        "gpu-node-1:4711:4711 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
        "pytorch",
    ),
    # NCCL transport.cc: a channel's setup
    "nccl-channel-p2p": (
        "gpu-node-1:4711:4790 [0] NCCL INFO Channel 00 : 0[3b000] -> 1[5e000] via P2P/IPC",
        "pytorch",
    ),
    # NCCL's parameter echo
    "nccl-shm-disabled": (
        "gpu-node-1:4711:4711 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.",
        "pytorch",
    ),
    # NCCL init.cc: ncclCommDestroy done
    "nccl-comm-destroyed": (
        "gpu-node-1:4711:4711 [0] NCCL INFO comm 0x5612a3b4c5d0 rank 0 nranks 8 cudaDev 0 busId 3b000 - Destroy COMPLETE",
        "pytorch",
    ),
    # PyTorch ProcessGroupNCCL.cpp: barrier's device guess
    "torch-best-guess": (
        "[W ProcessGroupNCCL.cpp:1569] Rank 0 using best-guess GPU 0 to perform barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to GPU mapping is incorrect.",
        "pytorch",
    ),
    # PyTorch ProcessGroupNCCL.cpp: its options echoed
    "torch-pg-options": (
        "[I ProcessGroupNCCL.cpp:587] [Rank 0] ProcessGroupNCCL initialized with following options:\nNCCL_ASYNC_ERROR_HANDLING: 1\nNCCL_DESYNC_DEBUG: 0\nNCCL_BLOCKING_WAIT: 0\nTIMEOUT(ms): 1800000\nUSE_HIGH_PRIORITY_STREAM: 0",
        "pytorch",
    ),
    # PyTorch c10d socket.cpp: IPv6 unavailable, IPv4 used
    "torch-ipv6-server": (
        "[W socket.cpp:426] [c10d] The server socket cannot be initialized on [::]:29500 (errno: 97 - Address family not supported by protocol).",
        "pytorch",
    ),
    # PyTorch ProcessGroupGloo.cpp: the loopback fallback
    "torch-gloo-loopback": (
        "[W ProcessGroupGloo.cpp:694] Warning: Unable to resolve hostname to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with GLOO_SOCKET_IFNAME. (function operator())",
        "pytorch",
    ),
    # PyTorch distributed_c10d.py: the store barrier completed
    "torch-store-barrier-ok": (
        "INFO:torch.distributed.distributed_c10d:Rank 3: Completed store-based barrier for key:store_based_barrier_key:1 with 4 nodes.",
        "pytorch",
    ),
    # torchelastic agent: its restart settings
    "torch-elastic-restart-config": (
        "INFO:torch.distributed.elastic.agent.server.api:[default] starting workers for entrypoint: python\n  max_restarts=3\n  monitor_interval=5\n  rdzv_timeout=900",
        "pytorch",
    ),
    # TF bfc_allocator.cc: an allocation it retried ('not a failure')
    "tf-bfc-not-a-failure": (
        "2019-03-01 10:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:239] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.32GiB with freed_by_count=0. The caller indicates that this is not a failure, but may mean that there could be performance gains if more memory were available.",
        "tensorflow",
    ),
    # TF gpu_device.cc: the device created
    "tf-created-device": (
        "2019-03-01 10:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1406] Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 14648 MB memory) -> physical GPU (device: 0, name: Tesla V100-SXM2-16GB, pci bus id: 0000:00:1e.0, compute capability: 7.0)",
        "tensorflow",
    ),
    # TF master.cc: waiting for a worker
    "tf-create-session-waiting": (
        "2019-03-01 10:00:00.000000: I tensorflow/core/distributed_runtime/master.cc:267] CreateSession still waiting for response from worker: /job:worker/replica:0/task:1",
        "tensorflow",
    ),
    # TF grpc_channel.cc: its channel cache
    "tf-grpc-channel": (
        "2019-03-01 10:00:00.000000: I tensorflow/core/distributed_runtime/rpc/grpc_channel.cc:215] Initialize GrpcChannelCache for job worker -> {0 -> 10.0.0.1:2222, 1 -> 10.0.0.2:2222}",
        "tensorflow",
    ),
    # a TF ConfigProto echoed
    "tf-gpu-options-echo": (
        "gpu_options {\n  allow_growth: true\n  per_process_gpu_memory_fraction: 0.9\n}\nreport_tensor_allocations_upon_oom: true",
        "tensorflow",
    ),
    # Horovod operations.cc at INFO
    "horovod-init": (
        "[1,0]<stdout>:[2020-01-01 10:00:00.000000: I horovod/common/operations.cc:514] Horovod initialized with 8 ranks, using MPI controller",
        "horovod",
    ),
    # Horovod's stall settings on a command line
    "horovod-stall-check-echo": (
        "HOROVOD_STALL_CHECK_TIME_SECONDS=60 HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=0 horovodrun -np 8 python train.py",
        "horovod",
    ),
    # Horovod elastic driver: a reset it recovers from
    "horovod-elastic-reset": (
        "[2021-01-01 10:00:00.000000: I horovod/runner/elastic/driver.py:200] Resetting Horovod with 8 workers after hosts changed; training will resume from the last commit",
        "horovod",
    ),
    # Open MPI help-mpi-btl-openib.txt: no active ports (openib ignored)
    "ompi-openib-no-active-ports": (
        "--------------------------------------------------------------------------\nWARNING: There is at least non-excluded one OpenFabrics device found,\nbut there are no active ports detected (or Open MPI was unable to use\nthem).  This is most certainly not what you wanted.  Check your\ncables, subnet manager configuration, etc.  The openib BTL will be\nignored for this job.\n\n  Local host: gpu-node-1\n--------------------------------------------------------------------------",
        "mpi",
    ),
    # Open MPI help-mpi-btl-openib.txt: no device params found
    "ompi-no-preset": (
        "--------------------------------------------------------------------------\nWARNING: No preset parameters were found for the device that Open MPI\ndetected:\n\n  Local host:            gpu-node-1\n  Device name:           mlx5_0\n  Device vendor ID:      0x02c9\n  Device vendor part ID: 4123\n\nDefault device parameters will be used, which may result in lower\nperformance.  You can edit any of the files specified by the\nbtl_openib_device_param_files MCA parameter to set values for your\ndevice.\n--------------------------------------------------------------------------",
        "mpi",
    ),
    # Open MPI help-mpi-btl-base.txt: btl:no-nics
    "ompi-another-transport": (
        "--------------------------------------------------------------------------\n[[12345,1],0]: A high-performance Open MPI point-to-point messaging module\nwas unable to find any relevant network interfaces:\n\nModule: OpenFabrics (openib)\n  Host: gpu-node-1\n\nAnother transport will be used instead, although this may result in\nlower performance.\n--------------------------------------------------------------------------",
        "mpi",
    ),
    # Open MPI help-opal-runtime.txt: the fork() warning
    "ompi-fork-warning": (
        '--------------------------------------------------------------------------\nA process has executed an operation involving a call to the\n"fork()" system call to create a child process.  Open MPI is currently\noperating in a condition that could result in memory corruption or\nother system errors; your job may hang, crash, or produce silent\ndata corruption.  The use of fork() (or system() or other calls that\ncreate child processes) is strongly discouraged.\n\n  Local host:          gpu-node-1\n  MPI_COMM_WORLD rank: 0\n--------------------------------------------------------------------------',
        "mpi",
    ),
    # Open MPI 4 help-mpi-btl-openib.txt: ib port not selected
    "ompi-ucx-default": (
        "--------------------------------------------------------------------------\nBy default, for Open MPI 4.0 and later, infiniband ports on a device\nare not used by default.  The intent is to use UCX for these devices.\nYou can override this policy by setting the btl_openib_allow_ib MCA parameter\nto true.\n\n  Local host:              gpu-node-1\n  Local adapter:           mlx5_0\n  Local port:              1\n--------------------------------------------------------------------------",
        "mpi",
    ),
    # Open MPI orte/util/show_help.c: aggregated help
    "ompi-aggregate-help": (
        '[gpu-node-0:04711] 7 more processes have sent help message help-mpi-btl-openib.txt / no active ports found\n[gpu-node-0:04711] Set MCA parameter "orte_base_help_aggregate" to 0 to see all help / error messages',
        "mpi",
    ),
    # kernel-monitor.json TaskHung: a hung task
    "npd-task-hung": (
        '[12345.678901] INFO: task python:4711 blocked for more than 120 seconds.\n[12345.678905]       Not tainted 5.4.0-1045-aws #47-Ubuntu\n[12345.678910] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.',
        "other",
    ),
    # kernel-monitor.json UnregisterNetDevice
    "npd-unregister-netdevice": (
        "[12345.678901] unregister_netdevice: waiting for eth0 to become free. Usage count = 1",
        "other",
    ),
    # kernel-monitor.json Ext4Error (no ENOSPC)
    "npd-ext4-error": (
        "[12345.678901] EXT4-fs error (device nvme1n1): ext4_find_entry:1455: inode #2: comm python: reading directory lblock 0",
        "other",
    ),
    # kernel-monitor.json IOError
    "npd-buffer-io": (
        "[12345.678901] Buffer I/O error on dev nvme1n1, logical block 0, async page read",
        "other",
    ),
    # kernel-monitor.json MemoryReadError: a corrected error
    "npd-ce-memory": (
        "[12345.678901] EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0 page:0x12345 offset:0x0 grain:32 syndrome:0x0)",
        "other",
    ),
    # the kubelet's oom_score_adj setting
    "oom-score-adj-echo": ("oom_score_adj=-997 set for pid 4711 (kubelet)", "other"),
    # Kueue: quota reserved, then admitted
    "kueue-admitted": (
        "Quota reserved in ClusterQueue cluster-queue, wait time since queued was 2s\nAdmitted by ClusterQueue cluster-queue, wait time since reservation was 0s",
        "kubernetes",
    ),
    # Karpenter: a nodeclaim launched
    "karpenter-launched": (
        'launched nodeclaim {"NodeClaim":{"name":"default-abcde"},"provider-id":"aws:///us-east-1a/i-0123456789abcdef0","instance-type":"p4d.24xlarge","zone":"us-east-1a","capacity-type":"on-demand","allocatable":{"cpu":"95690m","memory":"1082712Mi","nvidia.com/gpu":"8"}}',
        "kubernetes",
    ),
    # cluster-autoscaler: an empty node removed
    "ca-scale-down": ("Scale-down: removing empty node gpu-node-3", "kubernetes"),
    # SageMaker's job status, completed
    "sagemaker-completed": (
        "2024-01-01 10:00:00 Completed - Training job completed\nTraining seconds: 3600\nBillable seconds: 3600",
        "other",
    ),
    # Vertex AI: a job that succeeded
    "vertex-succeeded": (
        "Job completed successfully. The replica workerpool0-0 exited with a status of 0.",
        "other",
    ),
    # amdgpu at boot: an optional RAS firmware
    "amdgpu-ras-optional": (
        "[    5.123456] amdgpu 0000:03:00.0: amdgpu: RAS: optional ras ta ucode is not available",
        "pytorch",
    ),
    # MIOpen: no kernel database, slower
    "miopen-missing-db": (
        "MIOpen(HIP): Warning [SQLiteBase] Missing system database file: gfx90a6e.kdb Performance may degrade. Please follow instructions to install: https://github.com/ROCm/MIOpen#installing-miopen-kernels-package",
        "pytorch",
    ),
    # rocm-smi's memory report
    "rocm-smi-ok": (
        "GPU[0]\t\t: Temperature (Sensor edge) (C): 45.0\nGPU[0]\t\t: VRAM Total Memory (B): 68702699520\nGPU[0]\t\t: VRAM Total Used Memory (B): 10485760",
        "pytorch",
    ),
    # JAX xla_bridge.py: the CPU fallback
    "jax-cpu-fallback": (
        "WARNING:jax._src.xla_bridge:An NVIDIA GPU may be present on this machine, but a CUDA-enabled jaxlib is not installed. Falling back to cpu.",
        "jax",
    ),
    # Habana HCL at INFO
    "habana-hcl-info": ("[INFO] HCL: hcl_init: using 8 Gaudi devices, HCCL_COMM_ID=10.0.0.1:9696", "pytorch"),
    # AWS Neuron runtime at INFO
    "neuron-info": (
        "2024-Jan-01 10:00:00.0000  4711:4711  INFO  NRT:nrt_init  Neuron runtime initialized; 2 NeuronCores available, 32 GiB device memory",
        "pytorch",
    ),
    # oneDNN's verbose engine line
    "ipex-onednn-verbose": (
        "onednn_verbose,info,gpu,engine,0,backend:Level Zero,name:Intel(R) Data Center GPU Max 1550,driver_version:1.3.27191,binary_kernels:enabled",
        "pytorch",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_catalogs_line_that_reports_no_failure_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


# Events that name a failure word and report none of these rules: a volume not mounted yet, a pod preempted
# or scheduled, the kubelet reclaiming before it evicts, a node's status, a queue reserving quota, the
# autoscaler's decisions
_QUIET_EVENTS: dict[str, tuple[str, str]] = {
    # kubelet volume manager: FailedMount, timed out
    "failedmount-timeout": (
        "FailedMount",
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data kube-api-access-x2x4v]: timed out waiting for the condition",
    ),
    # kubelet: MountVolume.SetUp failed
    "failedmount-exit32": (
        "FailedMount",
        'MountVolume.SetUp failed for volume "data" : mount failed: exit status 32',
    ),
    # kube-scheduler: Preempted
    "preempted": ("Preempted", "Preempted by default/high-priority-job-worker-0 on node gpu-node-1"),
    # kubelet FailedCreatePodSandBox: a CNI failure
    "sandbox-cni": (
        "FailedCreatePodSandBox",
        'Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "3f4e": plugin type="calico" failed (add): error getting ClusterInformation: connection is unauthorized: Unauthorized',
    ),
    # kube-scheduler: Scheduled
    "scheduled": ("Scheduled", "Successfully assigned team/train-worker-0 to gpu-node-1"),
    # kubelet EvictionThresholdMet: reclaiming, no pod evicted
    "eviction-threshold-met": ("EvictionThresholdMet", "Attempting to reclaim ephemeral-storage"),
    # kubelet node status
    "node-sufficient-memory": (
        "NodeHasSufficientMemory",
        "Node gpu-node-1 status is now: NodeHasSufficientMemory",
    ),
    # kubelet node status
    "node-no-disk-pressure": (
        "NodeHasNoDiskPressure",
        "Node gpu-node-1 status is now: NodeHasNoDiskPressure",
    ),
    # node-problem-detector TaskHung
    "npd-taskhung": ("TaskHung", "INFO: task python:4711 blocked for more than 120 seconds."),
    # Kueue QuotaReserved
    "kueue-quota-reserved": (
        "QuotaReserved",
        "Quota reserved in ClusterQueue cluster-queue, wait time since queued was 2s",
    ),
    # cluster-autoscaler TriggeredScaleUp
    "ca-triggered": ("TriggeredScaleUp", "pod triggered scale-up: [{gpu-pool 1->2 (max: 4)}]"),
    # cluster-autoscaler NotTriggerScaleUp
    "ca-not-triggered": ("NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached"),
}


@pytest.mark.parametrize(("reason", "text"), list(_QUIET_EVENTS.values()), ids=list(_QUIET_EVENTS))
def test_an_event_that_reports_no_failure_stays_quiet(reason: str, text: str) -> None:
    stays_quiet(text, stack="pytorch", where="event", reason=reason)
