"""Every verbatim failure text of the corpus is explained by its rule, alone; near misses by none.

``tests/rules/corpus`` holds real log lines, termination messages and Event messages from
MPI, NCCL, Gloo, Horovod, UCX, InfiniBand, libfabric, PyTorch, TensorFlow, JAX, DeepSpeed and
Kubernetes, each labelled with the rule that should explain it (``expect``) and the rules
that must not (``also_not``: one cause, one finding). Each is replayed through the real rules
engine as the run the watchers would report (see ``corpus_replay``): the finding of its rule
must be the one finding left at the end. A near miss must raise nothing in a run that
succeeds, and nothing but the catch-all ``failed`` in a run that fails.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.rules.corpus_replay import Entry, load, run

ENTRIES = load()
FAILURES = [e for e in ENTRIES if e.expect is not None]
NEAR_MISSES = [e for e in ENTRIES if e.expect is None]


def test_the_corpus_is_the_one_described() -> None:
    ids = Counter(e.id for e in ENTRIES)

    assert [i for i, n in ids.items() if n > 1] == []
    assert len(ENTRIES) == 2699
    assert len(NEAR_MISSES) == 1123
    assert {e.where for e in ENTRIES} <= {"log", "event", "termination"}


@pytest.mark.parametrize("entry", FAILURES, ids=[e.id for e in FAILURES])
def test_failure_is_explained_by_its_rule_alone(entry: Entry) -> None:
    outcome = run(entry)

    assert sorted(outcome.rules) == [entry.expect], [f.root_cause for f in outcome.firing]
    assert not outcome.rules & set(entry.also_not)
    (finding,) = outcome.firing
    assert finding.evidence and finding.remediation
    assert not [step for step in finding.remediation if "{namespace}" in step or "{job}" in step]


@pytest.mark.parametrize("entry", NEAR_MISSES, ids=[e.id for e in NEAR_MISSES])
def test_near_miss_in_a_run_that_succeeds_raises_nothing(entry: Entry) -> None:
    outcome = run(entry, succeed=True)

    assert outcome.changes == ()


@pytest.mark.parametrize("entry", NEAR_MISSES, ids=[e.id for e in NEAR_MISSES])
def test_near_miss_in_a_run_that_fails_leaves_only_the_catch_all(entry: Entry) -> None:
    outcome = run(entry)

    assert sorted(outcome.rules) == ["failed"]


def test_the_same_text_as_a_termination_message_is_read_the_same() -> None:
    logs = [e for e in FAILURES if e.where == "log"]
    as_messages = [
        Entry(e.id, e.file, e.stack, "termination", e.expect, e.text, exit_code=e.exit_code) for e in logs
    ]

    differ = [e.id for e in as_messages if sorted(run(e).rules) != [e.expect]]

    assert differ == []


# What each family's finding must say, and the advice it must not give.
FAMILY_WORDS = {
    "openmpi-ssh-host-key-verification-failed-daemons": (
        ("Host key verification failed", "StrictHostKeyChecking"),
        ("known_hosts", "UserKnownHostsFile /dev/null"),
        "NetworkPolicies",
    ),
    "nccl-ib-plugin-completion-status-12-recv": (("InfiniBand", "status 12"), ("ibstat",), "NetworkPolicies"),
    "openmpi-openib-error-polling-hp-cq-flushed": (("InfiniBand", "work request flushed"), ("ibstat",), None),
    "rdma-recv-ibv-wc-retry-exc-err": (("transport retry counter exceeded",), ("ibstat",), None),
    "mpich-internal-init-thread-ofi-fi-fabric-failed": (
        ("OFI fi_fabric failed", "FI_PROVIDER"),
        ("libfabric",),
        "sidecar",
    ),
    "openmpi-btl-tcp-frag-readv-connection-reset": (
        ("Open MPI over TCP", "Connection reset by peer"),
        ("NetworkPolicies",),
        None,
    ),
}


@pytest.mark.parametrize("entry_id", FAMILY_WORDS, ids=list(FAMILY_WORDS))
def test_each_family_is_named_with_its_own_cause_and_remedy(entry_id: str) -> None:
    (entry,) = [e for e in FAILURES if e.id == entry_id]
    says, steps, never = FAMILY_WORDS[entry_id]

    (finding,) = run(entry).firing

    assert all(word in finding.root_cause for word in says), finding.root_cause
    assert all(any(word in step for step in finding.remediation) for word in steps), finding.remediation
    assert never is None or never not in finding.root_cause + " ".join(finding.remediation)
