"""The families the blind set of 2026-11-30s showed missing, and its false alarms, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines: Kubernetes 1.0's quota admission on
an object count and a controller's logfmt line quoting a refusal (``quota``); the kernel's memcg report at its
limit (``oom``); glibc 2.18-2.25's heap check with its own backtrace (``mpi-abort``); a Ray node failing to join
its head and XGBoost4J-Spark's tracker not starting (``rendezvous``); NCCL's proxy client polling, DeepEP's
kernels timing out, rabit's finalize and ORTE's state machine losing a daemon (``mpi-comm``); Intel's compute
runtime on a banned context's GPU page fault and NCCL's check on CUDA's unknown error (``gpu-error``).

Each near-miss names a family's words without reporting its failure: a page's example introduced by a sentence
(in English, a feature request's ``surfaces as``, a change's ``it logs a … message``, or in a language written
without spaces: ``例如``, ``包括``), the example standing a blank line below it or in a code fence; a page's
annotated example (``← 128 + 9``); a code comment saying what the next line will raise; a post-mortem's
summary and its list; a sentence in a language written without spaces quoting the message as a noun; and a
writer's sentence quoting a program's line in inline code inside it.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, the replay's stack)

_QUIET: dict[str, tuple[str, str]] = {
    # a feature request's account of how an error shows, its example fenced a blank line below
    "manifests-as-then-a-fenced-example": (
        "Today a lost peer manifests as:\n"
        "\n"
        "```\n"
        "RuntimeError: NCCL communicator was aborted on rank 3. Original reason for failure was: NCCL error: "
        "remote process exited or there was a network error\n"
        "```",
        "pytorch",
    ),
    # a change's account of what a program logs in general, the example fenced
    "it-prints-a-message-then-a-fenced-example": (
        "With this patch the writer prints a short warning instead of a stack trace:\n"
        "\n"
        "```\n"
        "OSError: [Errno 28] No space left on device: '/scratch/ckpt/step_100.pt'\n"
        "```",
        "pytorch",
    ),
    # a Chinese page's 'for example' with the example a blank line below
    "chinese-for-example-a-blank-line-above-the-example": (
        "训练大模型时显存不够会报错,比如:\n"
        "\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB (GPU 1; 23.65 GiB total "
        "capacity; 22.90 GiB already allocated)\n"
        "\n"
        "可以通过减小 batch size 解决。",
        "pytorch",
    ),
    # a Japanese page's 'for example' with a full-width colon
    "japanese-for-example-full-width-colon": (
        "ノード間の通信が切れると、例えば次のようなエラーになります\uff1a\n"
        "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45678> with error 12, opcode 0, len 0, vendor err "
        "129",
        "nccl",
    ),
    # a Chinese title quoting the message as a noun inside it
    "chinese-title-quoting-the-message": (
        '如何排查 "No space left on device" 导致的训练中断',
        "other",
    ),
    # an errors page's annotated example of a pod's state
    "annotated-describe-output": (
        "$ kubectl get pod trainer-0 -o yaml\n"
        "      terminated:\n"
        "        exitCode: 137        \u2190 SIGKILL from the kernel\n"
        "        reason: OOMKilled",
        "kubernetes",
    ),
    # a reproduction's comment on what the next call should throw
    "a-comment-says-what-the-next-line-should-throw": (
        "// this call should throw: CUDA error: an illegal memory access was encountered\n"
        "launch_bad_kernel<<<1, 1>>>(nullptr);",
        "pytorch",
    ),
    # a post-mortem's timeline of an incident, its items naming the errors
    "a-timeline-of-an-incident": (
        "Timeline of the outage:\n"
        "- 02:14 the scratch volume filled up and writes failed with ENOSPC\n"
        "- 02:30 jobs started failing with OOMKilled as the page cache grew",
        "other",
    ),
    # an answer quoting the program's line in inline code inside its sentence
    "an-answer-quoting-a-warning-inline": (
        "Everyone on this cluster sees the `NCCL WARN NET/IB : Got completion from peer 10.1.2.3<5000> with error 12, opcode 0, len 0, "
        "vendor err 129` line, so I "
        "would not worry about it.",
        "nccl",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_an_example_a_page_explains_or_quotes_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


def test_a_report_pasting_its_error_a_blank_line_below_still_counts() -> None:
    # the writer's own run, introduced by no example's sentence
    text = (
        "Training crashed after 3 epochs with this:\n"
        "\n"
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 39.59 GiB total "
        "capacity; 38.10 GiB already allocated; 512.00 MiB free; 38.50 GiB reserved in total by PyTorch)"
    )
    fires_saying(text, "gpu-oom", "out of memory", "batch", stack="pytorch")


def test_a_report_quoting_its_error_in_inline_code_still_counts() -> None:
    # a report's verb before the quote: the run's line
    text = "After two hours I got this error: `RuntimeError: CUDA error: an illegal memory access was encountered`"
    fires_saying(text, "gpu-error", "illegal memory access", "compute-sanitizer", stack="pytorch")


def test_a_code_fence_no_sentence_introduces_still_counts() -> None:
    text = (
        "```\n"
        "[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 1; 79.15 "
        "GiB total capacity; 77.00 GiB already allocated)\n"
        "```"
    )
    fires_saying(text, "gpu-oom", "out of memory", "batch", stack="pytorch")


# NCCL's CUDACHECK on cudaErrorUnknown (src/include/checks.h: ``Cuda failure %d '%s'``; before 2.12 without the
# code): the GPU's or its driver's fault, gpu-error's as CUDA's own ``unknown error`` is, not the communicator's
_CUDA_UNKNOWN_IN_NCCL: dict[str, str] = {
    "nccl-warn-line-with-the-code": (
        "gpu-3:4121:4190 [2] enqueue.cc:215 NCCL WARN Cuda failure 999 'unknown error'"
    ),
    "nccl-warn-line-before-2-12": "trainer-1:88:120 [0] init.cc:1032 NCCL WARN Cuda failure 'unknown error'",
    "horovod-relaying-the-last-error": (
        "horovod.common.exceptions.HorovodInternalError: ncclCommInitRank failed: unhandled cuda error\n"
        "Last error:\n"
        "Cuda failure 'unknown error'"
    ),
}


@pytest.mark.parametrize("text", list(_CUDA_UNKNOWN_IN_NCCL.values()), ids=list(_CUDA_UNKNOWN_IN_NCCL))
def test_nccls_check_on_cudas_unknown_error_is_the_gpus(text: str) -> None:
    fires_saying(text, "gpu-error", "cudaErrorUnknown", "Xid", stack="nccl")


def test_nccls_check_on_a_programs_cuda_error_stays_the_communicators() -> None:
    # an invalid argument is the program's (or NCCL's) call, not the GPU's fault
    text = (
        "[rank2]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda "
        "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n"
        "[rank2]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank2]: Last error:\n"
        "[rank2]: Cuda failure 1 'invalid argument'"
    )
    fires_saying(text, "mpi-comm", "ncclUnhandledCudaError", "NCCL_DEBUG", stack="nccl")


# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_QUOTA: dict[str, Wording] = {
    # a Go controller's logfmt line (logrus: time=… level=… msg=…) quoting the quota admission, a word of
    # a person's register in a name (``my-job``) inside it
    "logrus-controller-failed-quota": (
        'time="2024-02-01T08:00:00Z" level=error msg="reconcile failed" error="pods \\"my-job-worker-0\\" is '
        'forbidden: failed quota: compute: must specify limits.cpu" job=my-job',
        "ResourceQuota compute requires limits.cpu",
        "resources.limits",
        "kubernetes",
    ),
    # Kubernetes 1.0's quota admission on a count of objects (plugin/pkg/admission/resourcequota/admission.go:
    # ``Limited to %s %s``), relayed by a client at glog's level E
    "kubernetes-1-0-object-count": (
        'E0102 03:04:05.000001    4711 job_controller.go:120] pods "train-worker-2" is forbidden: Limited to '
        "10 pods",
        "allows at most 10 pods",
        "describe resourcequota",
        "kubernetes",
    ),
}


_OOM: dict[str, Wording] = {
    # the kernel's memcg OOM report (mm/memcontrol.c, mem_cgroup_print_oom_meminfo), its usage at its limit
    "memcg-report-usage-at-limit": (
        "Mar  3 10:11:12 gpu-node-7 kernel: memory: usage 8388608kB, limit 8388608kB, failcnt 2077\n"
        "Mar  3 10:11:12 gpu-node-7 kernel: memory+swap: usage 8388608kB, limit 9007199254740988kB, failcnt 0",
        "out of memory (limit",
        "resources.limits.memory",
        "linux",
    ),
}


_MPI_ABORT: dict[str, Wording] = {
    # glibc 2.18-2.25's malloc_printerr (``*** Error in `prog': …: 0x… ***``), then its own backtrace before
    # it aborts (sysdeps/posix/libc_fatal.c)
    "glibc-error-in-double-free-then-its-backtrace": (
        "*** Error in `/usr/bin/python': double free or corruption (fasttop): 0x00007f1c2c001230 ***\n"
        "======= Backtrace: =========\n"
        "/lib/x86_64-linux-gnu/libc.so.6(+0x777e5)[0x7f1c5e8a77e5]",
        "double free or corruption (fasttop)",
        "glibc",
        "mpich",
    ),
}


_RENDEZVOUS: dict[str, Wording] = {
    # Ray's GCS client giving up after its retries (src/ray/gcs/gcs_client/gcs_client.cc), at level E
    "ray-gcs-client-cluster-id": (
        "[2024-05-01 10:00:00,000 E 77 77] gcs_client.cc:190: Failed to get cluster ID from GCS server: "
        "TimedOut: Timed out while waiting for GCS to become available.",
        "could not join the Ray cluster's head",
        "RAY_raylet_start_wait_time_s",
        "other",
    ),
    # the Python driver's own connection given up (python/ray/_private: ``Failed to connect to GCS at
    # address=…. Last exception: …``)
    "ray-driver-connect-given-up": (
        "AssertionError: Failed to connect to GCS at address=ray-head.team-a.svc:6379. Last exception: "
        "RpcError: failed to connect to all addresses",
        "could not join the Ray cluster's head",
        "head service",
        "other",
    ),
    # XGBoost4J-Spark's tracker, logged by its RabitTracker without the exception
    "xgboost4j-spark-tracker-fault": (
        "24/03/02 11:00:00 ERROR RabitTracker: FAULT: Failed to start tracker",
        "could not start XGBoost's Rabit tracker",
        "spark.driver.host",
        "other",
    ),
}


_MPI_COMM: dict[str, Wording] = {
    # NCCL's proxy client (src/proxy.cc, ncclPollProxyResponse) under Open MPI's output tag, its WARN prefix
    # lost
    "nccl-proxy-poll-under-an-output-tag": (
        "[1,3]<stderr>:Socket recv failed while polling for opId=0x7f33a8c10e20",
        "communication failure (NCCL)",
        "NCCL_DEBUG",
        "nccl",
    ),
    # DeepEP's intranode kernel timing out on its combine receivers (csrc/kernels/intranode.cu)
    "deepep-intranode-combine-receivers": (
        "DeepEP timeout for combine receivers, rank 5, responsible_channel = 3, tokens remained: 128",
        "communication failure (DeepEP",
        "NVSHMEM_DEBUG",
        "other",
    ),
    # rabit's RabitFinalize failing (c_api.cc), raised by XGBoost4J under Spark's task
    "xgboost4j-rabit-finalize-failed": (
        "Caused by: ml.dmlc.xgboost4j.java.XGBoostError: Failed to shutdown RABIT worker.\n"
        "\tat ml.dmlc.xgboost4j.java.XGBoostJNI.checkCall(XGBoostJNI.java:48)",
        "communication failure (XGBoost",
        "tracker",
        "other",
    ),
    # ORTE's state machine at its verbosity, a daemon's lifeline to the HNP lost
    "orte-state-lifeline-lost": (
        "[node-2:01811] [[4411,0],2] ACTIVATE PROC [[4411,0],0] STATE LIFELINE LOST AT "
        "base/oob_base_stubs.c:112",
        "lost a remote MPI daemon",
        "NetworkPolicies",
        "openmpi",
    ),
}


_GPU_ERROR: dict[str, Wording] = {
    # Intel's compute runtime (NEO, drm_neo.cpp) on a banned context's page fault, a write to a PDE
    "intel-neo-gpu-page-fault-banned": (
        "Segmentation fault from GPU at 0x0000000000001000, ctx_id: 3 (CCS) type: 1 (NotPresent), level: 1 "
        "(PDE), access: 1 (Write), banned: 1, aborting.\n"
        "Abort was called at 274 line in file:\n"
        "../../neo/shared/source/os_interface/linux/drm_neo.cpp",
        "the GPU faulted on an address",
        "compute-sanitizer",
        "other",
    ),
}


_TABLES: dict[RuleId, dict[str, Wording]] = {
    "quota": _QUOTA,
    "oom": _OOM,
    "mpi-abort": _MPI_ABORT,
    "rendezvous": _RENDEZVOUS,
    "mpi-comm": _MPI_COMM,
    "gpu-error": _GPU_ERROR,
}


@pytest.mark.parametrize(WORDING_ARGS, wordings(_TABLES))
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


_NEAR: dict[str, tuple[str, str]] = {
    # a memcg report's counters under the limit: a parent's OOM, told by its own lines, or none
    "memcg-report-usage-under-limit": (
        "Mar  3 10:11:12 gpu-node-7 kernel: memory: usage 4194304kB, limit 8388608kB, failcnt 0",
        "linux",
    ),
    # glibc's heap check with no abort after it in the tail
    "glibc-error-in-without-its-abort": (
        "*** Error in `/usr/bin/python': free(): invalid pointer: 0x00007f1c2c001230 ***\nepoch 3 done",
        "other",
    ),
    # Ray's GCS client warning while it still retries, then nothing more: no verdict
    "ray-gcs-client-retrying": (
        "[2024-05-01 10:00:00,000 W 77 77] gcs_rpc_client.h:151: Failed to connect to GCS at address "
        "10.0.0.5:6379 within 5 seconds.",
        "other",
    ),
    # ORTE's state machine moving a daemon to an ordinary state
    "orte-state-running": (
        "[node-2:01811] [[4411,0],0] ACTIVATE PROC [[4411,1],3] STATE RUNNING AT base/odls_base_default_fns.c:1052",
        "openmpi",
    ),
    # DeepEP's own start-up report
    "deepep-buffer-created": ("DeepEP dispatch buffer created: 4 channels, 1024 tokens per rank", "other"),
    # a quota's count in a sentence, not the admission's refusal
    "limited-to-pods-in-a-sentence": (
        "Each namespace is limited to 10 pods by its ResourceQuota.",
        "kubernetes",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_NEAR.values()), ids=list(_NEAR))
def test_a_familys_near_miss_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
