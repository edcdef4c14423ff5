"""The families the blind set of 2026-11-30h showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: a memory
registration the EFA provider or its kernel driver refused, PSM2's and PSM3's own assertions and NIC units,
Open MPI's out-of-band connections between its daemons (ORTE's, ORCM's), UCX's test tools' connections
(``mpi-comm``); horovodrun's Gloo launcher on a rank that ended (``mpi-abort``); each c10d store's wait
timeout and the store-based barrier's in any case (``rendezvous``); a sanitizer's report of the signal it
caught and Python's fatal error in each of its prefixes (``segfault``); the kubelet's ``OOMKilled`` as a
listing prints it into a log (``oom``); the node's DiskPressure in the kubelet's eviction and admission words,
a line pasted whole as inline code (``disk-full``). Each near-miss names a family's words without reporting
its failure: a sanitizer's header alone, a report that is no crash, a condition that is false.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import WORDING_ARGS, Wording, fires_saying, replayed, stays_quiet, wordings

# id: (text, what the root cause says, what a step of the remediation says, the replay's stack)

_MPI_COMM: dict[str, Wording] = {
    # libfabric's EFA provider unable to register a region with the device (ofiwg/libfabric prov/efa
    # efa_mr.c, its FI_WARN format)
    "efa-provider-unable-to-register-mr": (
        "libfabric:2917:1690000000::efa:mr:efa_mr_reg_impl():301<warn> Unable to register MR: Cannot "
        "allocate memory",
        "EFA could not register memory",
        "memlock",
        "libfabric",
    ),
    # PSM2's assertion in its IPS protocol (cornelisnetworks/opa-psm2, psmi_assert_always's message)
    "psm2-ips-assertion": (
        "node07.31442: Assertion failure at ptl_ips/ips_proto_recv.c:1290: "
        "ipsaddr->msgctl->ipsaddr_next != NULL",
        "failed one of its own assertions",
        "PSM3_DEVICES=self,nic",
        "other",
    ),
    # PSM3 unable to open its NIC, the Ethernet counterpart of PSM2's hfi unit (intel/psm3, its
    # psm3_context_open error)
    "psm3-cant-open-nic-unit": (
        "node03.8812 PSM3 can't open nic unit: 0 (err=23)",
        "PSM2 / PSM3",
        "PSM2 / PSM3",
        "other",
    ),
    # ORTE's out-of-band TCP component on its receive side (open-mpi/ompi orte/mca/oob/tcp
    # oob_tcp_connection.c, the same check as its send handler's)
    "orte-oob-recv-handler-invalid-state": (
        "[gpu-node-2:02817] [[41234,0],0]-[[41234,0],3] mca_oob_tcp_peer_recv_handler: invalid "
        "connection state (4) on socket 17",
        "lost its out-of-band connection to a daemon",
        "oob_base_verbose",
        "openmpi",
    ),
    # UCX's io_demo on a read of an established connection (openucx/ucx test/apps/iodemo io_demo.cc, its
    # per-connection log prefix)
    "ucx-io-demo-connection-read-reset": (
        "[1700000000.123456] [UCX-connection #4 10.0.3.7:1337] read io request 0x7f2c failed: Connection "
        "reset by remote peer",
        "reset by that peer",
        "UCX_LOG_LEVEL",
        "ucx",
    ),
}

_MPI_ABORT: dict[str, Wording] = {
    # horovodrun's Gloo launcher on a rank that exited 1 (horovod/horovod horovod/runner/gloo_run.py)
    "horovodrun-gloo-exit-1": (
        "Process 3 exit with status code 1.",
        "Rank 3",
        "horovodrun",
        "horovod",
    ),
    # the same launcher on a rank its shell reports ended by SIGABRT (128 + 6)
    "horovodrun-gloo-exit-134-sigabrt": (
        "Process 1 exit with status code 134.",
        "signal 6",
        "HOROVOD_LOG_LEVEL",
        "horovod",
    ),
}

_RENDEZVOUS: dict[str, Wording] = {
    # the store's wait timing out in HashStore's and older releases' wording (pytorch/pytorch
    # torch/csrc/distributed/c10d HashStore.cpp)
    "hashstore-wait-timeout-capitalised": (
        "torch.distributed.DistStoreError: Wait timeout",
        "timed out waiting on the c10d store",
        "",
        "pytorch",
    ),
    # _store_based_barrier's timeout in an older release's wording, hyphenated as a report wrote it
    # (pytorch/pytorch torch/distributed/distributed_c10d.py)
    "store-based-barrier-hyphenated-rank-colon": (
        "RuntimeError: Timed out initializing process group in store-based barrier on rank: 3, for key: "
        "store_based_barrier_key:1 (world_size=4, worker_count=2, timeout=0:30:00)",
        "store barrier",
        "",
        "pytorch",
    ),
}

_SEGFAULT: dict[str, Wording] = {
    # ThreadSanitizer's deadly-signal report, a null pointer's write (llvm/llvm-project compiler-rt
    # sanitizer_common ReportDeadlySignal)
    "tsan-segv-null-write": (
        "==4711==ERROR: ThreadSanitizer: SEGV on unknown address 0x000000000000 (pc 0x55d0c0de1234 bp "
        "0x7ffd00000010 sp 0x7ffd00000000 T4711)\n"
        "==4711==The signal is caused by a WRITE memory access.\n"
        "==4711==Hint: address points to the zero page.\n"
        "    #0 0x55d0c0de1234 in fill_batch /src/loader/batch.cc:88:12",
        "ThreadSanitizer caught it: a write memory access, a null pointer's, in fill_batch()",
        "llvm-symbolizer",
        "other",
    ),
    # UndefinedBehaviorSanitizer's report of a SIGBUS it caught (compiler-rt, the same report)
    "ubsan-bus": (
        "==902==ERROR: UndefinedBehaviorSanitizer: BUS on unknown address 0x7f3a1c000000 (pc 0x4f2a10 bp "
        "0x7ffc8 sp 0x7ffc0 T902)",
        "bus error (SIGBUS)",
        "ASAN_OPTIONS",
        "other",
    ),
    # AddressSanitizer on a stack overflow, the SIGSEGV of the guard page (compiler-rt asan_errors.cpp)
    "asan-stack-overflow": (
        "==31==ERROR: AddressSanitizer: stack-overflow on address 0x7ffc5a3f2ff8 (pc 0x7f6e2 bp 0x7ffc5 sp "
        "0x7ffc5a3f3000 T0)",
        "AddressSanitizer caught it: a stack overflow",
        "ASAN_OPTIONS",
        "other",
    ),
    # pygame's parachute handler on SIGBUS, its older prefix without the function (pygame/pygame
    # src_c/base.c pygame_parachute)
    "pygame-parachute-bus-error": (
        "Fatal Python error: (pygame parachute) Bus Error\nPython runtime state: initialized",
        "bus error (SIGBUS)",
        "",
        "pytorch",
    ),
    # Python 3.9+'s fatal error with the function that raised it first (python/cpython Python/pylifecycle.c
    # fatal_error's ``func: msg``), a C extension's own handler
    "fatal-python-error-function-prefix": (
        "Fatal Python error: _sighandler: Segmentation fault\nPython runtime state: initialized",
        "segmentation fault (SIGSEGV)",
        "",
        "pytorch",
    ),
}

_OOM: dict[str, Wording] = {
    # a container's status as ``kubectl get pod -o yaml`` prints it, pasted into a job's log (the Kubernetes
    # API's ContainerStateTerminated)
    "status-yaml-last-state-reason-oomkilled": (
        "    lastState:\n"
        "      terminated:\n"
        "        containerID: containerd://4f1c\n"
        "        exitCode: 137\n"
        "        reason: OOMKilled",
        "out of memory",
        "",
        "kubernetes",
    ),
}

_DISK_FULL: dict[str, Wording] = {
    # older kubelets' eviction message naming the node condition (kubernetes/kubernetes pkg/kubelet/eviction
    # before 1.9), in a pod's status pasted into a log
    "status-message-low-on-resource-diskpressure": (
        "  message: 'The node was low on resource: [DiskPressure]. '\n  phase: Failed\n  reason: Evicted",
        "DiskPressure",
        "",
        "kubernetes",
    ),
    # a ``kubectl describe`` event row quoted whole as inline code, its condition among others
    "describe-row-quoted-whole-conditions-list": (
        "`  Warning  Evicted  12m  kubelet, gpu-node-3  The node had condition: [MemoryPressure, "
        "DiskPressure].`",
        "DiskPressure",
        "",
        "kubernetes",
    ),
}


@pytest.mark.parametrize(
    WORDING_ARGS,
    wordings(
        {
            "mpi-comm": _MPI_COMM,
            "mpi-abort": _MPI_ABORT,
            "rendezvous": _RENDEZVOUS,
            "segfault": _SEGFAULT,
            "oom": _OOM,
            "disk-full": _DISK_FULL,
        }
    ),
)
def test_a_familys_other_wording_is_its_own_with_its_librarys_words(
    rule: RuleId, text: str, said: str, step: str, stack: str
) -> None:
    fires_saying(text, rule, said, step, stack=stack)


def test_the_kubelets_event_on_diskpressure_in_an_older_wording_is_disk_full() -> None:
    """The eviction event in the kubelet's pre-1.9 wording, naming the condition in brackets."""
    text = "The node was low on resource: [DiskPressure]."
    assert (
        "disk-full" in replayed(text, "disk-full", stack="kubernetes", where="event", reason="Evicted").rules
    )


# a family's words named, not reported: a header any deadly signal prints, a sanitizer's report of no
# crash, a condition that is false, a store's wait that succeeded
_QUIET: dict[str, tuple[str, str]] = {
    # compiler-rt prints its DEADLYSIGNAL header for SIGFPE and SIGILL too: alone it names no segfault
    "sanitizer-header-alone": ("AddressSanitizer:DEADLYSIGNAL", "other"),
    # a heap overflow is the sanitizer's own abort, not a signal
    "asan-heap-buffer-overflow": (
        "==77==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000014 at pc 0x4f2a10 bp "
        "0x7ffc8 sp 0x7ffc0",
        "other",
    ),
    "node-condition-diskpressure-false": (
        "  DiskPressure     False   Mon, 01 Jan 2024 10:00:00 +0000   KubeletHasNoDiskPressure   kubelet has "
        "no disk pressure",
        "kubernetes",
    ),
    "status-reason-completed": ("    lastState:\n      terminated:\n        reason: Completed", "kubernetes"),
    "ucx-py-task-never-retrieved": (
        "Task exception was never retrieved\n"
        "future: <Task finished name='Task-12' coro=<_listener_handler() done> "
        "exception=UCXError('<stream_send>: Connection reset by remote peer')>",
        "other",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)
