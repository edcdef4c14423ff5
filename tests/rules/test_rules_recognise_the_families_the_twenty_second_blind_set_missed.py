"""The families the blind set of 2026-11-30n showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: Caffe's glog
check on a CUDA call out of memory in its other sources (``gpu-oom``); Ray's raylet killing a worker for the
node's memory, in a later release's words (``oom``); ps-lite's van failing to bind or connect, and UCX's verbs
transports getting a work completion back with an error (``mpi-comm``); a c10d store's ``connect() timed out.``
raised under the other handlers that create it (``rendezvous``); MPICH's bare error class followed by PALS
reporting the rank a SIGTERM ended (``mpi-abort``). Each near-miss names a family's words without reporting
its failure: an API reference's entry of an exception class or a function, a guide's list of the failures it
is for, a page's demonstration and its expected output, and a worker's crash the training loop went on past.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, rules_fired, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_GPU_OOM: dict[str, Wording] = {
    # Caffe's CUDA_CHECK in its BLAS wrappers, under the solver's progress (BVLC/caffe src/caffe/util/
    # math_functions.cu, include/caffe/util/device_alternate.hpp)
    "caffe-math-functions-cuda-check-out-of-memory": (
        "I0412 10:02:11.331 4411 solver.cpp:218] Iteration 0 (0 iter/s, 1.9s/20 iters), loss = 5.1\n"
        "F0412 10:02:12.004417  4411 math_functions.cu:79] Check failed: error == cudaSuccess (2 vs. 0)  out of "
        "memory\n*** Check failure stack trace: ***\n    @     0x7f3a1c5e5daa  (unknown)\n"
        "    @     0x7f3a1cc4f8f2  caffe::caffe_gpu_gemm<>()",
        "Caffe's CUDA_CHECK",
        "iter_size",
        "cuda",
    ),
    # the same check in its cuDNN convolution's workspace (BVLC/caffe src/caffe/layers/cudnn_conv_layer.cpp)
    "caffe-cudnn-conv-layer-cuda-check-out-of-memory": (
        "F1107 08:41:55.120 3188 cudnn_conv_layer.cpp:53] Check failed: error == cudaSuccess (2 vs. 0)  out of "
        "memory",
        "cudaErrorMemoryAllocation",
        "prototxt",
        "cuda",
    ),
}

_OOM: dict[str, Wording] = {
    # the raylet's kill in Ray 2.2's and later releases' words (ray-project/ray src/ray/raylet/node_manager.cc)
    "raylet-memory-on-the-node-exceeds-threshold-ray-killed-this-worker": (
        "(raylet, ip=10.0.1.7) Memory on the node (IP: 10.0.1.7, ID: 9f2c11) where the task (task ID: 3ab1, "
        "name=preprocess, pid=5120, memory used=12.31GB) was running was 29.97GB / 30.89GB (0.970247), which "
        "exceeds the memory usage threshold of 0.95. Ray killed this worker (ID: 77e0) because it was the most "
        "recently scheduled task; to see more information about memory usage on this node, use `ray logs "
        "raylet.out -ip 10.0.1.7`.",
        "Ray's memory monitor",
        "RAY_memory_usage_threshold",
        "other",
    ),
}

_MPI_COMM: dict[str, Wording] = {
    # upstream ps-lite's van when its bind loop gave up (dmlc/ps-lite src/van.cc: ``CHECK_NE(port, -1) <<
    # "bind failed"``)
    "pslite-van-check-failed-bind-failed": (
        "[09:12:40] src/van.cc:81: Check failed: (my_node_.port) != (-1) bind failed",
        "could not bind or connect its port",
        "DMLC_PS_ROOT_PORT",
        "other",
    ),
    # its ZeroMQ van's connect to a node's address (dmlc/ps-lite src/zmq_van.h Connect)
    "pslite-zmq-van-connect-to-address-failed": (
        "[09:12:40] src/./zmq_van.h:231: Check failed: (zmq_connect(sender, addr.c_str())) == (0) connect to "
        "tcp://10.0.4.2:9000 failed: No such device",
        "ps-lite's van",
        "DMLC_NODE_HOST",
        "other",
    ),
    # UCX's UD verbs transport on a completion flushed from its queue pair (openucx/ucx src/uct/ib/ud/verbs)
    "ucx-ud-verbs-fatal-send-completion-flushed": (
        "[cn12:8812:0:8812] ud_verbs.c:257  FATAL: send completion with error: Work Request Flushed Error",
        "completed with an error (Work Request Flushed Error)",
        "UCX_NET_DEVICES",
        "ucx",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # torch 1.x's env:// handler creating the store (pytorch/pytorch torch/distributed/rendezvous.py)
    "env-rendezvous-handler-tcpstore-connect-timed-out": (
        '  File "/usr/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line 172, in '
        "_env_rendezvous_handler\n    store = TCPStore(master_addr, master_port, world_size, start_daemon, "
        "timeout)\nRuntimeError: connect() timed out.",
        "connect() timed out",
        "MASTER_ADDR",
        "pytorch",
    ),
    # torch elastic's c10d backend creating its store (torch/distributed/elastic/rendezvous/
    # c10d_rendezvous_backend.py)
    "elastic-create-tcp-store-connect-timed-out": (
        '  File "/opt/conda/lib/python3.8/site-packages/torch/distributed/elastic/rendezvous/'
        'c10d_rendezvous_backend.py", line 142, in _create_tcp_store\n    store = TCPStore(  # type: '
        "ignore[call-arg]\nRuntimeError: connect() timed out.",
        "while the process group was set up",
        "--rdzv-endpoint",
        "pytorch",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # Cray MPICH's tagged abort with the bare class, then PALS on the rank SIGTERM ended (HPE Cray MPICH)
    "cray-mpich-other-mpi-error-then-pals-signal-15": (
        "MPICH ERROR [Rank 12] [job id 8812.0] [Mon Mar  3 10:11:12 2025] [x1000c0s0b0n0] - Abort(15) (rank 12 "
        "in comm 0): Fatal error in PMPI_Allreduce: Other MPI error\nx1000c0s0b0n0: rank 12 died from signal 15",
        "signal 15 (SIGTERM)",
        "PALS",
        "mpich",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "gpu-oom": _GPU_OOM,
            "oom": _OOM,
            "mpi-comm": _MPI_COMM,
            "rendezvous": _RENDEZVOUS,
            "mpi-abort": _MPI_ABORT,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


def test_a_worker_crash_the_loop_did_not_go_on_past_is_still_a_segfault() -> None:
    """The same crash with the loop's counter not passing on after it (the last step printed again) fires."""
    text = (
        "Epoch 12 step 4400 loss 0.318\nERROR: Unexpected segmentation fault encountered in worker.\n"
        "Epoch 12 step 4400 loss 0.318"
    )
    assert rules_fired(text, "segfault", stack="pytorch") == {"segfault"}


def test_a_source_line_with_an_unspaced_arrow_is_no_reference_entry() -> None:
    """C++'s ``a.b(x)->c`` above a failure (a sanitizer's or a compiler's quoted line) opens no documentation:
    only a reference's signature spaced around its arrow does."""
    text = (
        "    ctx.stream(0)->synchronize\nRuntimeError: CUDA error: an illegal memory access was encountered"
    )
    assert rules_fired(text, "gpu-error", stack="pytorch") == {"gpu-error"}


def test_the_bare_class_with_no_rank_killed_after_it_stays_the_meshs() -> None:
    """MPICH's generic class named alone, no process manager reporting a rank a signal ended, is still read as
    the rank's MPI call failing (mpi-comm)."""
    text = "Abort(1) on node 3 (rank 3 in comm 0): Fatal error in PMPI_Wait: Other MPI error"
    assert "mpi-comm" in rules_fired(text, "mpi-comm", stack="mpich")


# a family's words named, not reported: an API reference's entry, a guide's list, a demonstration, a crash the
# run went on past
_QUIET: dict[str, tuple[str, str]] = {
    # PyTorch's reference of its exception class (its Sphinx entry, the permalink after the name)
    "sphinx-exception-entry-torch-cuda-oom": (
        "exception torch.cuda.OutOfMemoryError#\nException raised when device is out of memory",
        "pytorch",
    ),
    # a class's entry whose docstring quotes the older message it replaces
    "sphinx-class-entry-quoting-older-message": (
        "class torch.cuda.OutOfMemoryError\n\nException raised when device is out of memory. The allocator "
        "raises it where PyTorch used to raise RuntimeError: CUDA out of memory.",
        "pytorch",
    ),
    # a helper's entry, its annotated signature, naming the messages it recognises
    "function-entry-should-reduce-batch-size": (
        "accelerate.utils.should_reduce_batch_size(exception: Exception) → bool\nChecks if exception relates "
        "to CUDA out of memory, CUDNN not supported, or CPU out of memory: RuntimeError: CUDA out of memory. "
        "and DefaultCPUAllocator: can't allocate memory are both recognised.",
        "pytorch",
    ),
    # a runbook's symptoms section, its list of what it is for
    "runbook-symptoms-list-illegal-memory-access": (
        "## Symptoms\n\n- RuntimeError: CUDA error: an illegal memory access was encountered\n- Xid 13 or Xid "
        "31 in dmesg on the node\n- NCCL watchdog timeouts on the other ranks",
        "cuda",
    ),
    # a guide's heading and the errors it covers
    "guide-common-errors-list": (
        "Common errors:\n  * CUDA error: out of memory\n  * CUDA error: an illegal memory access was encountered",
        "cuda",
    ),
    # a page demonstrating a full volume, the error a reader will get
    "demonstration-you-will-get-fallocate-enospc": (
        "Fill the volume to see what the job sees; you will get this:\n$ fallocate -l 200G /scratch/fill.img\n"
        "fallocate: fallocate failed: No space left on device",
        "linux",
    ),
    # a page's expected output of the same
    "expected-output-dd-dev-shm-enospc": (
        "Expected output:\ndd: error writing '/dev/shm/fill': No space left on device",
        "linux",
    ),
    # a DataLoader worker's crash, the loop's step passing on after it
    "worker-segfault-then-next-step": (
        "Epoch 12 step 4400 loss 0.318\nERROR: Unexpected segmentation fault encountered in worker.\n"
        "Epoch 12 step 4500 loss 0.312",
        "pytorch",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
