"""The families the blind set of 2026-11-28e showed missing, in other wordings than its own.

Each failure is a wording of its family from another printer (HPE's PALS, MPD, ALPS, a PGAS runtime;
CUDA's ECC error framed by other programs; XLA's PjRt client; torch elastic's rendezvous handler
errors by their class names); each near-miss is a run that handled what it printed or a thread's
title that names an error as its topic.
"""

from __future__ import annotations

import pytest

from controller.contract.findings import RuleId
from tests.rules.corpus_replay import Entry, run


def _rules(text: str, expect: RuleId | None, *, stack: str = "other") -> set[str]:
    entry = Entry(id="t", file="t", stack=stack, where="log", reason=None, expect=expect, text=text)
    return set(run(entry).rules) - {"failed"}


@pytest.mark.parametrize(
    "text",
    [
        "x1000c0s0b0n0: rank 3 died from signal 11 and dumped core",
        "Rank 0 in job 4 node07_41233  caused collective abort of all ranks\n"
        "  Exit status of rank 0: killed by signal 11",
        "_pmiu_daemon(SIGCHLD): [NID 00412] [c1-0c0s3n0] [Tue Mar  4 10:02:11 2025] PE RANK 12 exit signal "
        "Segmentation fault",
        "Exiting due to signal 11 with siginfo 0x7ffd and payload 0x0",
    ],
    ids=["pals-died-from", "mpd-killed-by", "alps-exit-signal", "runtime-exiting-due-to"],
)
def test_a_runtime_saying_a_process_died_of_signal_11_is_a_segfault(text: str) -> None:
    assert _rules(text, "segfault", stack="mpich") == {"segfault"}


def test_a_rank_that_died_of_another_signal_is_no_segfault() -> None:
    assert "segfault" not in _rules("x1000c0s0b0n0: rank 3 died from signal 15", None)


@pytest.mark.parametrize(
    "text",
    [
        "CUDA error: uncorrectable ECC error encountered (set `CUDA_LAUNCH_BLOCKING=1` to see where, and "
        "run `nvidia-smi -q -d ECC` on the node)",
        "Check failed: error == cudaSuccess (214 vs. 0)  uncorrectable ECC error encountered",
        "cupy_backends.cuda.api.runtime.CUDARuntimeError: cudaErrorECCUncorrectable: uncorrectable ECC error "
        "encountered",
    ],
    ids=["cuda-error-with-inline-code", "caffe-check-failed", "cupy-runtime-error"],
)
def test_cudas_uncorrectable_ecc_error_in_any_framing_is_a_gpu_error(text: str) -> None:
    assert _rules(text, "gpu-error", stack="pytorch") == {"gpu-error"}


@pytest.mark.parametrize(
    "text",
    [
        "E0915 08:01:12.000000 1234 pjrt_stream_executor_client.cc:2809] Execution of replica 1 failed: "
        "RESOURCE_EXHAUSTED: Attempting to reserve 10.50G at the bottom of memory. That was not possible. "
        "There are 7.12G free, 0B reserved, and 7.12G reservable.",
        "2020-01-02 03:04:05.678901: E external/org_tensorflow/tensorflow/compiler/xla/python/"
        "local_client.cc:700] Execution of replica 3 failed: Resource exhausted: Out\nof memory while "
        "trying to allocate 1073741824 bytes.",
    ],
    ids=["pjrt-attempting-to-reserve", "local-client-wrapped"],
)
def test_xla_running_out_of_device_memory_while_executing_a_replica_is_a_gpu_oom(text: str) -> None:
    assert _rules(text, "gpu-oom", stack="jax") == {"gpu-oom"}


def test_tensorflows_resource_exhausted_on_a_file_stays_a_full_disk() -> None:
    text = (
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: /mnt/ckpt/model.ckpt-900."
        "data-00000-of-00001.tempstate123; No space left on device"
    )
    assert _rules(text, "disk-full", stack="tensorflow") == {"disk-full"}


@pytest.mark.parametrize(
    "text",
    [
        "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'trainer-2_81_0' has "
        "failed to shutdown the rendezvous 'job-7' due to an error of type RendezvousConnectionError.",
        "torch.distributed.elastic.rendezvous.api.RendezvousStateError: The state object of the "
        "rendezvous 'job-7' could not be read.",
        "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
    ],
    ids=["shutdown-connection-error", "state-error", "closed-error"],
)
def test_torch_elastics_rendezvous_handler_errors_are_a_rendezvous(text: str) -> None:
    assert _rules(text, "rendezvous", stack="pytorch") == {"rendezvous"}


def test_a_rendezvous_connection_error_takes_precedence_over_the_mesh_errors_after_it() -> None:
    text = (
        "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'w-1_9_0' has failed to "
        "send a keep-alive heartbeat to the rendezvous 'r' due to an error of type RendezvousConnectionError.\n"
        "RuntimeError: Connection reset by peer"
    )
    assert _rules(text, "rendezvous", stack="pytorch") == {"rendezvous"}


@pytest.mark.parametrize(
    "text",
    [
        "[trainer] catching torch.cuda.OutOfMemoryError in the training step\n"
        "[trainer] halved the batch size to 8 and restarted the epoch",
        "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "auto-batch: retrying the step with a smaller batch (16)",
    ],
    ids=["catches-then-halves", "retries-with-a-smaller-batch"],
)
def test_a_caught_gpu_oom_retried_at_a_smaller_batch_fires_nothing(text: str) -> None:
    assert _rules(text, None, stack="pytorch") == set()


@pytest.mark.parametrize(
    "text",
    [
        "[data] 'No space left on device' should be handled when spilling",
        "How to fix CUDA out of memory in the validation loop",
        '[train] "Segmentation fault (core dumped)" should not crash the whole job',
    ],
    ids=["should-be-handled", "how-to-fix", "should-not-crash"],
)
def test_a_title_that_names_an_error_as_its_topic_fires_nothing(text: str) -> None:
    assert _rules(text, None) == set()
