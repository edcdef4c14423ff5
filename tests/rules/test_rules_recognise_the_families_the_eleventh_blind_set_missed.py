"""The families the blind set of 2026-11-30c showed missing, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines: the c10d client announcing a
retry after its whole timeout had passed, and its socket waiting for the store's answer in vain
(``rendezvous``); PaddlePaddle's allocator raising ``ResourceExhaustedError`` (``gpu-oom``); a person's
sentence saying what the kernel log showed, quoted in code (``gpu-error``); MPICH's singleton init unable
to exec its ``mpiexec`` (``mpi-comm``); the cloud's own quota refusing a volume (``quota``). Each near-miss
is what the set's false alarms were, in other words: a title asking for an error to be handled, an error
class named bare (a thread's topic), an Xid the driver itself calls non-fatal.
"""

from __future__ import annotations

from tests.rules.corpus_replay import fires_alone, stays_quiet

# ------------------------------------------------------------------ rendezvous


def test_a_c10d_retry_announced_after_its_whole_timeout_passed_is_a_missed_rendezvous() -> None:
    # our own wording of the retry pytorch/pytorch#129261 added to TCPStore's connect: the attempt
    # already waited the whole timeout, so no retry is left
    text = (
        "[W314 09:12:03.118 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host "
        "master-0:29500 - retrying (try=2, timeout=300000ms, delay=1200ms): The client socket has timed "
        "out after 300000ms while trying to connect to (master-0, 29500)."
    )
    finding = fires_alone(text, "rendezvous", stack="pytorch")
    assert "master-0:29500 within 300s" in finding.root_cause


def test_a_c10d_retry_with_time_left_is_no_failure() -> None:
    # the same retry early in its timeout: the client goes on trying
    stays_quiet(
        "[W314 09:12:03.118 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host "
        "master-0:29500 - retrying (try=0, timeout=300000ms, delay=900ms): The client socket has timed "
        "out after 60000ms while trying to connect to (master-0, 29500).",
        stack="pytorch",
    )


def test_the_store_socket_waiting_in_vain_for_its_answer_is_a_missed_rendezvous() -> None:
    # our own wording of socket.cpp's waitForInput, over IPv4
    text = (
        "[rank3]:[W1102 04:10:55.5521 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=41, "
        "addr=[10.0.3.7]:51022, remote=[10.0.3.2]:29500) timed out after 600000ms"
    )
    finding = fires_alone(text, "rendezvous", stack="pytorch")
    assert "waited 600s for the c10d store at 10.0.3.2:29500" in finding.root_cause


# ------------------------------------------------------------------ GPU memory


def test_paddles_allocator_out_of_memory_is_gpu_oom() -> None:
    # our own wording of Paddle's allocator message (the title of PaddlePaddle/Paddle#21685)
    text = (
        "ResourceExhaustedError:\n\n"
        "Out of memory error on GPU 3. Cannot allocate 1.250000GB memory on GPU 3, 30.500000GB memory has "
        "been allocated and available memory is only 512.000000MB."
    )
    finding = fires_alone(text, "gpu-oom", stack="other")
    assert "PaddlePaddle" in finding.root_cause


# ------------------------------------------------------------------ GPU errors


def test_a_sentence_saying_what_the_kernel_log_showed_is_read_as_that_output() -> None:
    text = (
        "Same crash on our A100 node after two hours; the kernel log showed `NVRM: Xid (PCI:0000:3b:00): 79, "
        "pid=2211, GPU has fallen off the bus.` right before it."
    )
    finding = fires_alone(text, "gpu-error", stack="cuda")
    assert "Xid 79" in finding.root_cause


def test_an_xid_the_driver_calls_nonfatal_is_no_failure() -> None:
    # the driver's severity on an NVLink Xid (our own line in its format)
    stays_quiet(
        "NVRM: Xid (PCI:0000:41:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 3 (0x00000000 0x00000004)",
        stack="cuda",
    )


# ------------------------------------------------------------------ the mesh


def test_mpichs_singleton_init_unable_to_exec_mpiexec_is_a_communication_failure() -> None:
    # MPICH's simple PMI (src/pmi/simple/simple_pmi.c) printing perror's reason, here another errno
    text = (
        "PMII_singinit: execv failed: Permission denied\n"
        "[unset]:   This singleton init program attempted to access some feature\n"
        "[unset]:   for which process manager support was required, e.g. spawn or universe_size."
    )
    finding = fires_alone(text, "mpi-comm", stack="mpich")
    assert "MPICH" in finding.root_cause


# ------------------------------------------------------------------ quota


def test_the_clouds_own_quota_refusing_a_volume_is_a_quota_refusal() -> None:
    # our own event in the wording of Compute Engine's quota error
    text = (
        'Failed to provision volume with StorageClass "premium-rwo": googleapi: Error 403: Quota '
        "'DISKS_TOTAL_GB' exceeded. Limit: 4096.0 in region europe-west4., quotaExceeded"
    )
    finding = fires_alone(text, "quota", where="event", reason="ProvisioningFailed")
    assert "DISKS_TOTAL_GB" in finding.root_cause
    assert "europe-west4" in finding.root_cause
    assert any("cloud" in step for step in finding.remediation)


# ------------------------------------------------------------------ near-misses


def test_a_title_asking_for_an_error_to_be_handled_is_no_failure() -> None:
    stays_quiet("[serving] Gracefully handle torch.cuda.OutOfMemoryError in the batcher", stack="pytorch")


def test_an_error_class_named_bare_is_a_topic_not_output() -> None:
    # a library's class, unqualified and without a message: Python would print its module
    stays_quiet("RendezvousClosedError", stack="pytorch")
