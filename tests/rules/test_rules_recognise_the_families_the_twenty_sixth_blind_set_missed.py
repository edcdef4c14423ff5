"""The families the blind set of 2026-11-30r showed missing, and its false alarms, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: Hydra failing
to create a process, the runtime's out-of-band TCP channel giving up on a daemon and an MPICH stack's socket
frame (``mpi-comm``); a Gloo store's wait timeout and torch 1.x's bare one (``rendezvous``); earlyoom's kill
(``oom``); zsh's job table on a signal (``segfault``); PaddlePaddle's launcher on a failed container and Open
MPI's handler on SIGABRT (``mpi-abort``); DeepSpeed's GEMM wrapper printing cuBLAS's status 13 (``gpu-error``);
PaddlePaddle's enforce that its reserve fits the GPU (``gpu-oom``). Each near-miss
names a family's words without reporting its failure: an exception's class or message as the subject of a page's
sentence about it (in English or in a language written without spaces), a writer's surmise about what a program
does on an error quoted in inline code, a source file and line quoted alone in a sentence, and TensorFlow's
stream executor noting at level I an allocation it then got past (the libraries it loads next).
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_MPI_COMM: dict[str, Wording] = {
    # mpiexec's bootstrap failing to create the process that starts a proxy (Hydra's
    # tools/bootstrap/external/external_common_launch.c)
    "hydra-mpiexec-bootstrap-create-process-returned-error": (
        "[mpiexec@launcher-0] HYDT_bscd_common_launch_procs (tools/bootstrap/external/external_common_launch.c"
        ":296): create process returned error\n"
        "[mpiexec@launcher-0] HYD_pmci_launch_procs (pm/pmiserv/pmiserv_pmci.c:181): launcher returned error",
        "Hydra on launcher-0 could not create the processes it launches",
        "path and permissions",
        "mpich",
    ),
    # a newer MPICH's proxy on one line (pm/pmiserv/pmip_cb.c)
    "hydra-proxy-launch-procs-one-line": (
        "[proxy:0:1@trainer-worker-1] launch_procs (pm/pmiserv/pmip_cb.c:699): create process returned error\n"
        "[proxy:0:1@trainer-worker-1] HYD_pmcd_pmip_control_cmd_cb (pm/pmiserv/pmip_cb.c:893): launch_procs "
        "returned error",
        "Hydra on trainer-worker-1 could not create the processes it launches",
        "path and permissions",
        "mpich",
    ),
    # Open MPI 4's out-of-band TCP channel (orte/mca/oob/tcp) giving up on a daemon's address
    "orte-oob-tcp-peer-try-connect-retries-exceeded": (
        "[node-a:01234] [[41872,0],0] orte_tcp_peer_try_connect: 10.4.0.17:1024 retries exceeded",
        "lost a remote MPI daemon",
        "NetworkPolicies",
        "openmpi",
    ),
    # PRRTE's on an IPv6 address
    "prrte-oob-tcp-peer-try-connect-retries-exceeded-ipv6": (
        "[host-b:7710] [prterun-host-b-7710@0,1] prte_tcp_peer_try_connect: [fd00::12]:40211 retries exceeded",
        "lost a remote MPI daemon",
        "NetworkPolicies",
        "openmpi",
    ),
    # MPICH's TCP netmod failing a write, the headline cut (nemesis netmod tcp)
    "mpich-nemesis-tcp-write-to-socket-failed": (
        "MPIDI_CH3I_Progress(176)..........: \n"
        "MPID_nem_tcp_send_queued(150).....: write to socket failed - Bad file descriptor",
        "write to socket failed - Bad file descriptor",
        "NetworkPolicies",
        "mpich",
    ),
    # MPICH's frame where the peer closed the socket
    "mpich-frame-socket-closed": (
        "MPIDI_CH3I_Progress(176)..........: \nstate_commrdy_handler(1017).......: socket closed",
        "socket closed",
        "NetworkPolicies",
        "mpich",
    ),
}


_RENDEZVOUS: dict[str, Wording] = {
    # Gloo's own FileStore (gloo/rendezvous/file_store.cc), thrown uncaught as its IoException
    "gloo-file-store-wait-timeout-io-exception": (
        "terminate called after throwing an instance of 'gloo::IoException'\n"
        '  what():  [/opt/gloo/gloo/rendezvous/file_store.cc:132] Wait timeout for key(s): ["rank_1"]',
        "timed out waiting on Gloo's rendezvous store",
        "MASTER_ADDR",
        "gloo",
    ),
    # Horovod's in-memory store, built on Gloo's store interface (horovod/common/gloo/memory_store.cc)
    "horovod-memory-store-wait-timeout": (
        "  what():  [/tmp/pip-req-build/horovod/common/gloo/memory_store.cc:59] Wait timeout for key(s): "
        "[rank_3]",
        "timed out waiting on Gloo's rendezvous store",
        "MASTER_ADDR",
        "horovod",
    ),
    # an older Horovod's HTTP store, without the seconds (http_store.cc)
    "horovod-http-store-wait-timeout-older": (
        "  what():  [/usr/local/lib/python3.8/dist-packages/horovod/common/gloo/http_store.cc:52] Wait timeout "
        "for key(s): 3",
        "the launcher's HTTP rendezvous store (Horovod's Gloo)",
        "HOROVOD_GLOO_TIMEOUT_SECONDS",
        "horovod",
    ),
    # PaddlePaddle's HDFS store for its Gloo wrapper, through its enforce
    "paddle-hdfs-store-wait-timeout": (
        "paddle.fluid.core_avx.EnforceNotMet: Wait timeout for key(s): trainer_1 at "
        "[/paddle/paddle/fluid/framework/fleet/gloo_wrapper.cc:105]",
        "timed out waiting on Gloo's rendezvous store",
        "MASTER_ADDR",
        "other",
    ),
    # torch 1.x's TCPStore raising its bare wait timeout under init_process_group's tcp:// handler
    "torch-1x-tcpstore-bare-wait-timeout": (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 9, in <module>\n'
        '    dist.init_process_group("gloo", init_method="tcp://10.0.0.1:23456", rank=1, world_size=4)\n'
        '  File "/usr/lib/python3.7/site-packages/torch/distributed/rendezvous.py", line 95, in '
        "_tcp_rendezvous_handler\n"
        "    store = TCPStore(result.hostname, result.port, world_size, start_daemon)\n"
        "RuntimeError: Wait timeout",
        "timed out waiting on the store while the process group was set up",
        "MASTER_ADDR",
        "pytorch",
    ),
}


_OOM: dict[str, Wording] = {
    # earlyoom past its SIGKILL limit, its verdict then its kill (kill.c)
    "earlyoom-sigkill-limits": (
        "Nov 29 09:00:01 gpu-node-3 earlyoom[812]: low memory! at or below SIGKILL limits: mem  4.00%, swap  "
        "4.00%\n"
        'Nov 29 09:00:01 gpu-node-3 earlyoom[812]: sending SIGKILL to process 4711 uid 0 "python3": badness '
        "912, VmRSS 61234 MiB",
        'earlyoom (a userspace OOM killer on the node) killed process "python3"',
        "journalctl -u earlyoom",
        "linux",
    ),
    # an earlier release's kill, before it printed the uid
    "earlyoom-sigterm-without-uid": (
        'earlyoom[1001]: sending SIGTERM to process 2202 "torchrun": badness 870, VmRSS 20480 MiB',
        'killed process "torchrun"',
        "--avoid / --prefer",
        "linux",
    ),
    # its first releases, the kill's line in its own words after
    "earlyoom-first-release-out-of-memory": (
        "Out of memory! avail: 512 MiB < min: 1600 MiB\nKilling process 5120 python",
        "earlyoom (a userspace OOM killer on the node)",
        "journalctl -u earlyoom",
        "linux",
    ),
}


_SEGFAULT: dict[str, Wording] = {
    # zsh's job table on a bus error, the job the current one (jobs.c's printjob)
    "zsh-job-table-bus-error-core-dumped": (
        "[2]  + 4242 bus error (core dumped)  ./solver -i in.dat",
        "crashed with a bus error (SIGBUS)",
        "/dev/shm",
        "linux",
    ),
    # the same table on a segmentation fault with a core, the job's number not a rank
    "zsh-job-table-segmentation-fault-core-dumped": (
        "[1]    9121 segmentation fault (core dumped)  python -m train --cfg a.yaml",
        "Worker 0 crashed with a segmentation fault (SIGSEGV)",
        "Read the backtrace",
        "pytorch",
    ),
}


_MPI_ABORT: dict[str, Wording] = {
    # PaddlePaddle's launcher on a trainer a signal ended (Popen's negative code)
    "paddle-launch-container-failed-signal-9": (
        "LAUNCH ERROR 2024-03-02 10:11:12,001 Container failed !!!\n"
        "Container rank 3 status failed cmd ['python', '-u', '-m', 'paddle_train', '--config', 'x.yaml'] "
        "code -9 log log/workerlog.3",
        "Rank 3 on worker-0 was killed by signal 9 (SIGKILL)",
        "Read the failing rank's own error",
        "other",
    ),
    # the same launcher on a trainer that exited with an error of its own
    "paddle-launch-container-failed-code-2": (
        "Container rank 1 status failed cmd ['/usr/bin/python3', 'train.py'] code 2 log log/workerlog.1",
        "Rank 1 on worker-0 exited with code 2",
        "Read the failing rank's own error",
        "other",
    ),
    # Open MPI's signal handler on SIGABRT in a rank on another node, glibc's frames after it
    "ompi-signal-handler-aborted-6": (
        "[gpu-node-7:20311] *** Process received signal ***\n"
        "[gpu-node-7:20311] Signal: Aborted (6)\n"
        "[gpu-node-7:20311] Signal code:  (-6)\n"
        "[gpu-node-7:20311] [ 0] /lib/x86_64-linux-gnu/libc.so.6(+0x42520)[0x7f1e]",
        "A rank on gpu-node-7 aborted: Open MPI's signal handler in the rank reported SIGABRT",
        "Read the failing rank's own error",
        "openmpi",
    ),
}


_GPU_ERROR: dict[str, Wording] = {
    # DeepSpeed's GEMM wrapper on another shape (its inference kernels print the same)
    "deepspeed-gemm-kernel-execution-error-13": (
        "!!!! kernel execution error. (m: 1024, n: 2048, k: 1024, error: 13)",
        "a cuBLAS routine's GPU kernel failed to run (CUBLAS_STATUS_EXECUTION_FAILED)",
        "CUDA_LAUNCH_BLOCKING=1",
        "deepspeed",
    ),
}


_GPU_OOM: dict[str, Wording] = {
    # PaddlePaddle 1.x's wording of the same enforce, with its message
    "paddle-1x-expected-allocating-le-available": (
        "paddle.fluid.core_avx.EnforceNotMet: Enforce failed. Expected allocating <= available, but received "
        "allocating:8589934592 > available:2147483648.\n"
        "Insufficient GPU memory to allocation. at [/paddle/paddle/fluid/platform/gpu_info.cc:262]",
        "the GPU's free memory is less than the share it reserves",
        "FLAGS_fraction_of_gpu_memory_to_use",
        "other",
    ),
}


_TABLES: dict[RuleId, dict[str, Wording]] = {
    "mpi-comm": _MPI_COMM,
    "rendezvous": _RENDEZVOUS,
    "oom": _OOM,
    "segfault": _SEGFAULT,
    "mpi-abort": _MPI_ABORT,
    "gpu-error": _GPU_ERROR,
    "gpu-oom": _GPU_OOM,
}


@pytest.mark.parametrize(WORDING_ARGS, wordings(_TABLES))
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# a family's words named, not reported
_QUIET: dict[str, tuple[str, str]] = {
    # an English reference page's sentence on an elastic error's class
    "class-indicates-in-english": (
        "RendezvousTimeoutError indicates that the rendezvous did not complete within the configured timeout.",
        "pytorch",
    ),
    # a Japanese page's sentence on a CUDA error's class (the particle right after it)
    "class-explained-in-japanese": (
        "torch.cuda.OutOfMemoryError は、GPU のメモリが足りないときに送出されます。",
        "pytorch",
    ),
    # a Chinese page's sentence on NCCL's error class, a space before it
    "class-explained-in-chinese": (
        "DistBackendError 表示 NCCL 通信后端在集合通信中失败。",
        "pytorch",
    ),
    # an article opening with Python's own MemoryError message as its subject
    "message-as-an-articles-subject": (
        "RuntimeError: CUDA error: an illegal memory access was encountered is an error that every CUDA "
        "programmer meets sooner or later.",
        "pytorch",
    ),
    # a page opening with an error's message as one of the most common ones
    "message-one-of-the-most-common": (
        "torch.OutOfMemoryError: CUDA out of memory is one of the most common errors in deep learning.",
        "pytorch",
    ),
    # a comment's surmise about MPI's exit code, the call quoted in code
    "surmise-about-an-exit-code": (
        "It seems that `MPI_Abort` is called with errorcode 0 here, so the scheduler marks the job as completed "
        "and nobody notices the `Connection refused` before it.",
        "openmpi",
    ),
    # a pull request's surmise about NCCL's behaviour, its file quoted alone
    "surmise-nccl-file-quoted": (
        "Apparently the worker keeps going after `NCCL WARN Net : Connection closed by remote peer` because "
        "the error is swallowed in `src/transport/net_socket.cc:412`.",
        "pytorch",
    ),
    # a source file and line quoted alone in a sentence that names an error
    "file-and-line-quoted-alone": (
        "The segmentation fault handler lives in `c10/util/signal_handler.cpp:130` and only prints a "
        "backtrace when enabled.",
        "pytorch",
    ),
    # a proxy's normal attempt to reach a daemon, retries not yet spent (PRRTE's verbose output)
    "oob-tcp-attempting-to-connect": (
        "[host-b:7710] [prterun-host-b-7710@0,1] prte_tcp_peer_try_connect: attempting to connect to proc "
        "[prterun-host-b-7710@0,0] on 10.0.0.2:49717 - 0 retries",
        "openmpi",
    ),
    # MPICH's error name explained
    "mpich-read-from-socket-failed-explained": (
        "The read from socket failed - nread=0 error means the peer rank closed its connection first.",
        "mpich",
    ),
    # Hydra's error explained
    "hydra-create-process-explained": (
        "create process returned error means the proxy could not execvp the program you gave mpiexec.",
        "mpich",
    ),
    # earlyoom's start-up summary and its periodic report
    "earlyoom-startup-and-report": (
        "earlyoom v1.7\nmem total: 64000 MiB, swap total:    0 MiB\n"
        "sending SIGTERM when mem <= 10.00% and swap <= 10.00%,\n"
        "        SIGKILL when mem <=  5.00% and swap <=  5.00%\n"
        "mem avail: 30211 of 64000 MiB (47.20%), swap free:    0 of    0 MiB ( 0.00%)",
        "linux",
    ),
    # Gloo's wait timeout explained in a guide
    "gloo-wait-timeout-explained": (
        "Gloo raises `Wait timeout for key(s): …` when a rank never writes its key; raise "
        "HOROVOD_GLOO_TIMEOUT_SECONDS for slow starts.",
        "horovod",
    ),
    # zsh's job table on a job that finished or was stopped
    "zsh-job-table-done-and-suspended": (
        "[1]  - 9121 done       python train.py\n[2]  + 9180 suspended  vim notes.md",
        "linux",
    ),
    # PaddlePaddle's launcher listing a container still running
    "paddle-launch-container-running": (
        "Container rank 0 status running cmd ['python', '-u', 'train.py'] code -1 log log/workerlog.0",
        "other",
    ),
    # Open MPI's handler on SIGABRT described in a page
    "ompi-handler-aborted-described": (
        "When a rank calls abort(), Open MPI's handler prints Signal: Aborted (6) followed by a backtrace.",
        "openmpi",
    ),
    # DeepSpeed's GEMM wrapper's message explained
    "deepspeed-kernel-execution-error-explained": (
        "The kernel execution error (error: 13) that DeepSpeed prints means cuBLAS returned "
        "CUBLAS_STATUS_EXECUTION_FAILED.",
        "deepspeed",
    ),
    # PaddlePaddle's enforce explained
    "paddle-allocating-le-available-explained": (
        "If you see allocating <= available failed, lower FLAGS_fraction_of_gpu_memory_to_use.",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


# TensorFlow's stream executor noting a failed allocation at level I (cuda_driver.cc, rocm_driver.cc; the
# BFC allocator asks again for less), then going on: what it logs next at level I
_ALLOCATION_NOTED_THEN_WENT_ON: dict[str, str] = {
    "cuda-then-device-created": (
        "2022-03-01 10:00:00.000001: I tensorflow/stream_executor/cuda/cuda_driver.cc:739] failed to allocate "
        "3.90G (4190109696 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
        "2022-03-01 10:00:00.200000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1525] Created device "
        "/job:localhost/replica:0/task:0/device:GPU:0 with 3700 MB memory"
    ),
    "xla-cuda-then-cudnn-loaded": (
        "2023-06-01 08:00:00.000001: I tensorflow/compiler/xla/stream_executor/cuda/cuda_driver.cc:753] failed "
        "to allocate 14.2G (15245230080 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
        "\n"
        "2023-06-01 08:00:02.100000: I tensorflow/compiler/xla/stream_executor/cuda/cuda_dnn.cc:424] Loaded "
        "cuDNN version 8600"
    ),
}


@pytest.mark.parametrize(
    "text", list(_ALLOCATION_NOTED_THEN_WENT_ON.values()), ids=list(_ALLOCATION_NOTED_THEN_WENT_ON)
)
def test_an_allocation_noted_at_level_i_then_gone_past_stays_quiet(text: str) -> None:
    stays_quiet(text, stack="tensorflow")


def test_the_same_allocation_logged_at_level_e_still_counts() -> None:
    # the same driver's failure at level E, the run going on to load a library: a failure
    text = (
        "2019-08-26 18:41:15.943905: E tensorflow/stream_executor/cuda/cuda_driver.cc:828] failed to allocate "
        "2.96G (3173555200 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n"
        "2019-08-26 18:41:16.000000: I tensorflow/stream_executor/dso_loader.cc:152] successfully opened CUDA "
        "library libcublas.so.10.0 locally"
    )
    fires_saying(text, "gpu-oom", "out of memory", "batch", stack="tensorflow")


def test_an_allocation_noted_at_level_i_last_in_the_tail_still_counts() -> None:
    # nothing after it: the run ended there
    text = (
        "2020-05-03 02:06:12.462209: I tensorflow/stream_executor/cuda/cuda_driver.cc:764] failed to allocate "
        "512.0M (536870912 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory"
    )
    fires_saying(text, "gpu-oom", "out of memory", "batch", stack="tensorflow")
