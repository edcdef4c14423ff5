"""The families the blind set of 2026-11-30u showed missing, and its false alarms, in other wordings than its own.

Each near-miss names a family's words on a page that explains an error, as the set's four explaining pages did,
in other words than theirs: a troubleshooting step telling the reader what to look for (``Check …``, ``Look in
… for``, ``Search … for``); a FAQ's question quoting an error, answered below it (``This error means …``,
``该错误表示 …``); a writer's account of failures that come now and then, the message standing under it without
a colon; a guide's symptoms heading with a rendered page's permalink sign, its list item introducing examples
(``… with messages like:``); and a page telling what the reader (``you get:``) would see.

Each failure is a wording of its family written apart from the set's lines: the NVIDIA driver's Xid line in
its older drivers' format, a kernel launched with a configuration the GPU cannot run (``gpu-error``); the TPU
runtime's allocation larger than its memory (``gpu-oom``); OpenVZ's kill in a container's user beancounter and
Hugging Face Spaces' memory limit (``oom``); Spaces' eviction for its storage (``disk-full``); Open MPI's PMIx
client unable to reach a server, HPX's libfabric parcelport, HCCL's topology exchange (``mpi-comm``); a
person's ``I get:`` before what the run printed (``segfault``).
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, stays_quiet, wordings

# id: (text, the replay's stack)

_EXPLAINED: dict[str, tuple[str, str]] = {
    # a runbook's step, the kernel's line it says to look for
    "look-in-dmesg-for-the-kill": (
        "Look in the node's dmesg for Memory cgroup out of memory: Killed process 4242 (python) to confirm "
        "the kill.",
        "linux",
    ),
    # a numbered step naming a full disk's error
    "check-the-worker-logs-for-enospc": (
        "1. Check the worker logs for OSError: [Errno 28] No space left on device before raising the volume.",
        "pytorch",
    ),
    # NCCL's words in a step, its own format among them
    "search-the-launcher-output-for-nccl": (
        "Search the launcher output for NCCL WARN Connection reset by peer to find the rank that left.",
        "nccl",
    ),
    # a FAQ's question, its answer below it in English
    "faq-answer-this-error-means": (
        "Training fails with RuntimeError: NCCL communicator was aborted on rank 3.\n"
        "This error means that another rank died or timed out first; check its log.",
        "nccl",
    ),
    # the same in Chinese, on GPU memory
    "faq-answer-cjk-gpu-oom": (
        "运行时报“torch.cuda.OutOfMemoryError: CUDA out of memory”\n该错误表示显存不足,请减小batch size。",
        "pytorch",
    ),
    # another HCCL code, the answer blaming the other cards
    "faq-answer-cjk-hccl": (
        "执行时报“EI0006: Getting socket times out. Reason: Remote Rank did not send the data in time.”\n"
        "此错误是由于其他卡未在超时时间内建链导致的。",
        "other",
    ),
    # failures that come now and then, the message under a blank line
    "intermittent-failures-with-the-error": (
        "Our nightly runs hit intermittent failures with the error\n\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "pytorch",
    ),
    # the same of an MPI abort
    "sporadic-aborts-with-the-message": (
        "There are sporadic CI aborts with the message\n\n"
        "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD\nwith errorcode 1.",
        "openmpi",
    ),
    # a rendered guide's heading and its permalink sign, an item introducing the kernel's line
    "symptoms-permalink-messages-like": (
        'Symptoms¶\n- Out of memory: the pods are killed with messages like:\n"Memory cgroup out of memory: '
        'Killed process 4242 (python)"',
        "linux",
    ),
    # a heading's hash permalink, the example under the item unquoted
    "common-errors-hash-errors-like": (
        "Common errors#\n- Disk: writes fail with errors like:\nOSError: [Errno 28] No space left on device",
        "pytorch",
    ),
    # what the reader would see, the second person
    "you-get-a-segfault": (
        "If you run it without the flag, you get: Segmentation fault (core dumped)",
        "other",
    ),
    # the Spaces' words inside a sentence, not its status line
    "space-memory-limit-in-a-sentence": (
        "The Space page shows Memory limit exceeded (16Gi) when the model is too big for the free tier.",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_EXPLAINED.values()), ids=list(_EXPLAINED))
def test_a_page_explaining_an_error_stays_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


_STILL_REPORTED: dict[str, tuple[str, RuleId, str, str, str]] = {
    # a failure with its message below, no word of it coming now and then
    "fails-with-the-message": (
        "The job fails with the message\n\nRuntimeError: CUDA error: an illegal memory access was encountered",
        "gpu-error",
        "illegal memory access",
        "CUDA_LAUNCH_BLOCKING",
        "pytorch",
    ),
    # a person's sentence after the error, no answer's explanation
    "this-error-happens-every-time": (
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "This error happens every time I use 2 nodes.",
        "gpu-error",
        "illegal memory access",
        "CUDA_LAUNCH_BLOCKING",
        "pytorch",
    ),
    # a program's own check, not the reader's step
    "a-health-check-for-a-node-failed": (
        "health check for node failed: CUDA error: an illegal memory access was encountered",
        "gpu-error",
        "illegal memory access",
        "CUDA_LAUNCH_BLOCKING",
        "pytorch",
    ),
}


@pytest.mark.parametrize(
    ("text", "rule", "said", "step", "stack"), list(_STILL_REPORTED.values()), ids=list(_STILL_REPORTED)
)
def test_a_report_beside_those_families_still_counts(
    text: str, rule: RuleId, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_GPU_ERROR: dict[str, Wording] = {
    # the older drivers' Xid line, its address without ``PCI:``
    "xid-48-older-driver-address": (
        "kernel: NVRM: Xid (0000:82:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU "
        "in the framebuffer at partition 0, subpartition 0.",
        "Xid 48",
        "kubectl cordon",
        "cuda",
    ),
    # the same format from a syslog, another code
    "xid-43-older-driver-syslog": (
        "Mar 3 10:11:12 node7 kernel: [ 812.003311] NVRM: Xid (0000:02:00): 43, Ch 00000010, engmask 00000101",
        "Xid 43",
        "CUDA_LAUNCH_BLOCKING",
        "linux",
    ),
    # PyTorch's check of the runtime's text
    "torch-invalid-configuration-argument": (
        "RuntimeError: CUDA error: invalid configuration argument\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
        "might be incorrect.",
        "a configuration the GPU cannot run",
        "maxThreadsPerBlock",
        "pytorch",
    ),
    # HIP's name of the same
    "hip-error-invalid-configuration": (
        "HIP error: hipErrorInvalidConfiguration at /src/kernels/reduce.hip:212",
        "a configuration the GPU cannot run",
        "maxThreadsPerBlock",
        "other",
    ),
}


_GPU_OOM: dict[str, Wording] = {
    # jaxlib's class, another shape and size
    "tpu-allocation-would-exceed-memory": (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Allocation (size=34359738368) would exceed "
        "memory (size=17179869184) :: #allocation12 [shape = 'f32[8192,1048576]{1,0:T(8,128)}', space=hbm, "
        "size = 0xffffffffffffffff, tag = 'output of fusion.3@{}'] :: <no-hlo-instruction>",
        "TPU out of memory",
        "XLA_PYTHON_CLIENT_MEM_FRACTION",
        "jax",
    ),
}


_OOM: dict[str, Wording] = {
    # OpenVZ's beancounter kill from a syslog, another container
    "openvz-ub-oom-killed-process": (
        "Feb 2 03:04:05 host kernel: Out of memory in UB 1042: OOM killed process 8123 (python3) score 0 "
        "vm:9437184kB, rss:8123456kB, swap:1024kB",
        "as OpenVZ reported it",
        "user_beancounters",
        "linux",
    ),
    # its 2.6.18 kernels' wording
    "openvz-older-oom-killed-exited": (
        "OOM killed process java (pid=22341, ve=117) exited, free=2048 gen=5.",
        "as OpenVZ reported it",
        "vzctl set",
        "linux",
    ),
}


_MPI_COMM: dict[str, Wording] = {
    # Open MPI 4's PMIx 3 component, direct-launched without a server
    "opal-pmix3x-client-unreachable": (
        "[node01:12345] OPAL ERROR: Unreachable in file pmix3x_client.c at line 112",
        "could not reach a PMIx server",
        "PMIx",
        "openmpi",
    ),
    # HPX's parcelport on the fabric object after fi_getinfo
    "hpx-parcelport-failed-to-get-fi-fabric": (
        "<ERROR> ------------------ 0x7f2a10 Failed to get fi_fabric : Function not implemented "
        "/opt/hpx/plugins/parcelport/libfabric/fabric_error.hpp 31",
        "HPX's libfabric parcelport could not set up its transport",
        "hpx.parcel.libfabric.enable=0",
        "libfabric",
    ),
    # HCCL's exchange agent waiting for the server
    "hccl-topo-exchange-agent-socket-timeout": (
        "[ERROR] HCCL(4021,python3):2024-05-01-10:00:00.000.000 [topoinfo_exchange_agent.cc:120] "
        "[4021][Connect]topo exchange agent get socket timeout! timeout[1800]",
        "topology exchange did not complete",
        "HCCL_CONNECT_TIMEOUT",
        "other",
    ),
    # the agent's connect to the server, another port
    "hccl-topo-exchange-agent-connect-server": (
        "[ERROR] HCCL(4021,python3):2024-05-01-10:00:00.000.100 [topoinfo_exchange_agent.cc:52] "
        "[4021][TopoInfoExchangeAgent][Setup]TopoExchangeAgent: connect server[10.0.0.5 : 60001] failed",
        "topology exchange did not complete",
        "HCCL_CONNECT_TIMEOUT",
        "other",
    ),
}


_SEGFAULT: dict[str, Wording] = {
    # the writer's run, the shell's line after ``I get:``
    "i-get-segmentation-fault": (
        "When I start it with 4 ranks I get: Segmentation fault (core dumped)",
        "segmentation fault",
        "backtrace",
        "other",
    ),
    # the first person plural, a loader's dots before it
    "we-got-dots-then-segmentation-fault": (
        "After the upgrade we got: ....Segmentation fault (core dumped)",
        "segmentation fault",
        "backtrace",
        "other",
    ),
}


_TABLES: dict[RuleId, dict[str, Wording]] = {
    "gpu-error": _GPU_ERROR,
    "gpu-oom": _GPU_OOM,
    "oom": _OOM,
    "mpi-comm": _MPI_COMM,
    "segfault": _SEGFAULT,
}


@pytest.mark.parametrize(WORDING_ARGS, wordings(_TABLES))
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


# Hugging Face Spaces' status on a Space's page, as its container's termination message
_SPACES: dict[RuleId, dict[str, Wording]] = {
    "oom": {
        # another hardware's memory
        "hf-space-memory-limit-32gi": (
            "Runtime error\nMemory limit exceeded (32Gi)",
            "Hugging Face Spaces",
            "hardware tier",
            "other",
        ),
    },
    "disk-full": {
        # a smaller disk
        "hf-space-evicted-storage-20g": (
            "Runtime error\nSpace evicted, storage limit exceeded (20G)",
            "wrote more to its disk than its hardware's storage allows",
            "persistent storage",
            "other",
        ),
    },
}


@pytest.mark.parametrize(WORDING_ARGS, wordings(_SPACES))
def test_a_spaces_status_is_its_family_with_the_platforms_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack, where="termination")
