"""The families the blind set of 2026-11-30r showed missing, and its false alarms, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind. Each near-miss
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

_TABLES: dict[RuleId, dict[str, Wording]] = {}


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
