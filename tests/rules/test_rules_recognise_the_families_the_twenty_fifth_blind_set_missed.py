"""The families the blind set of 2026-11-30q showed missing, and its false alarms, in other wordings than its own.

Each failure is a wording of its family written apart from the set's lines, one table per kind: gdb's account of
the signal that ended a program and c10's fatal signal handler (``segfault``); Open MPI's mpirun on a rank a
signal of its own code ended, the node's name empty (``mpi-abort``; SIGSEGV stays ``segfault``); a CUDA kernel's
device-side assertion under a functor's or a template's whole name (``gpu-error``); NCCL's bootstrap root
refusing a check-in and Horovod's stall warning cut after its opening words (``mpi-comm``); torch elastic's
connection error in its message alone, for the C10d store or etcd, and the store barrier's error raised under a
title's own words (``rendezvous``); OpenPAI's exit reason for a container over the memory it requested
(``oom``). Each near-miss names a family's words without reporting its failure: a c10d socket warning under a
whole build path (torch retries and goes on), the kubelet's eviction quoted in a person's account, and the
harmless neighbours of each family learnt (another library's check-in note, gdb on another signal, prose).
"""

from __future__ import annotations

import pytest

from tests.rules.corpus_replay import replayed, stays_quiet

# a family's words named, not reported
_QUIET: dict[str, tuple[str, str]] = {
    # a c10d socket warning under a Windows build's whole path (torch tries the next address and goes on)
    "c10d-socket-warning-windows-build-path-10049": (
        "[W C:\\actions-runner\\_work\\pytorch\\pytorch\\builder\\windows\\pytorch\\torch\\csrc\\distributed"
        "\\c10d\\socket.cpp:601] [c10d] The client socket has failed to connect to [trainer-pc.local]:29500 "
        "(system error: 10049 - The requested address is not valid in its context.).",
        "pytorch",
    ),
    # the same warning under a Linux build's whole path (an IPv6 address the host lacks)
    "c10d-socket-warning-linux-build-path-ipv6": (
        "[W1129 10:00:00.000000000 /opt/conda/conda-bld/pytorch_1700000000000/work/torch/csrc/distributed/c10d/"
        "socket.cpp:697] [c10d] The client socket could not connect to [localhost]:29500 (errno: 97 - Address "
        "family not supported by protocol).",
        "pytorch",
    ),
    # the kubelet's eviction quoted in a person's account in a log
    "eviction-quoted-in-an-account-in-a-log": (
        '3:11 AM. A healthy pod got evicted with the reason "The node was low on resource: ephemeral-storage. '
        'Threshold quantity: 10%." The app was fine.',
        "kubernetes",
    ),
}


@pytest.mark.parametrize(("text", "stack"), list(_QUIET.values()), ids=list(_QUIET))
def test_a_familys_words_named_not_reported_stay_quiet(text: str, stack: str) -> None:
    stays_quiet(text, stack=stack)


def test_an_eviction_quoted_in_an_account_read_as_an_event_stays_quiet() -> None:
    # a person's account pasted where an event's message is read, another of the eviction manager's wordings
    text = (
        "Last night our training pod was evicted with the message 'Pod ephemeral local storage usage exceeds "
        "the total limit of containers 10Gi.' We moved the cache to a PVC and it has not happened since."
    )
    assert replayed(text, None, stack="kubernetes", where="event", succeed=True).rules == frozenset()
    assert replayed(text, None, stack="kubernetes", where="event").rules <= {"failed"}


def test_the_eviction_managers_message_as_a_status_field_still_counts() -> None:
    text = (
        "status:\n"
        "  message: 'The node was low on resource: ephemeral-storage. Threshold quantity: 10%, available: 1Gi.'\n"
        "  phase: Failed\n"
        "  reason: Evicted"
    )
    assert replayed(text, "disk-full", stack="kubernetes", where="event").rules - {"failed"} == {"disk-full"}
