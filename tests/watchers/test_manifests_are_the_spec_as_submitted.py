"""A job's manifest as the watcher publishes it: the job as submitted, without ``status``,
``managedFields`` or what the API server fills in, secrets of a recognisable shape redacted (an
``env`` value whose name reads as a secret, a token in a command), and cut to 64 KiB with a
closing line saying so."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.contract.events import MANIFEST_TRUNCATED, MAX_MANIFEST_BYTES, manifest_truncated
from controller.testing import objects as k
from watchers import manifests
from watchers.manifests import manifest
from watchers.normalizing import normalize_job


def _submitted() -> dict[str, Any]:
    job = k.with_conditions(
        k.mpijob("llm", "team-a", 2), ("Running", "MPIJobRunning", "2026-11-20T10:00:30Z")
    )
    job["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}
    ]
    job["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": '{"spec": {"env": "DB_PASSWORD=hunter2"}}',
        "team.example.com/owner": "alice",
    }
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    worker["env"] = [
        {"name": "DB_PASSWORD", "value": "hunter2"},
        {"name": "HF_TOKEN", "value": "hf_abcdefghijklmnopqrstuvwxyz0123456789"},
        {"name": "NCCL_DEBUG", "value": "INFO"},
        {"name": "S3_KEY", "valueFrom": {"secretKeyRef": {"name": "s3", "key": "key"}}},
    ]
    worker["args"] = ["--api-key", "sk-proj-abcdefghijklmnopqrstuvwxyz", "--epochs", "3"]
    return job


def test_the_manifest_is_what_a_person_submitted_with_secrets_redacted() -> None:
    job = _submitted()
    text = manifest(job)
    shown = yaml.safe_load(text)
    assert list(shown) == ["apiVersion", "kind", "metadata", "spec"]  # no status
    assert set(shown["metadata"]) == {"name", "namespace", "labels", "annotations"}
    assert shown["metadata"]["annotations"] == {"team.example.com/owner": "alice"}  # not kubectl's copy
    assert "managedFields" not in text and "resourceVersion" not in text and "uid" not in shown["metadata"]
    worker = shown["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in worker["env"]}
    assert env["DB_PASSWORD"] == "[REDACTED]" and env["HF_TOKEN"] == "[REDACTED]"
    assert env["NCCL_DEBUG"] == "INFO" and env["S3_KEY"] == {"secretKeyRef": {"name": "s3", "key": "key"}}
    assert worker["args"] == ["--api-key", "[REDACTED]", "--epochs", "3"]
    assert "hunter2" not in text and "hf_abc" not in text and "sk-proj" not in text
    assert shown["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    assert not manifest_truncated(text)
    # and it travels on the job's observation
    observed = normalize_job(job, "MODIFIED", datetime(2026, 11, 20, 10, 1, tzinfo=UTC))
    assert observed.manifest == text


def test_a_huge_spec_is_cut_at_a_line_with_a_closing_line_saying_so() -> None:
    job = copy.deepcopy(_submitted())
    job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"] += [
        {"name": f"VAR_{i:05d}", "value": "x" * 100} for i in range(2000)
    ]
    text = manifest(job)
    assert len(text.encode()) <= MAX_MANIFEST_BYTES
    assert manifest_truncated(text)
    *kept, last = text.rstrip("\n").split("\n")
    assert last.startswith(MANIFEST_TRUNCATED) and "bytes in all" in last
    assert kept[-1].strip().startswith(("- name: VAR_", "value: "))  # whole lines only
    normalize_job(job, "MODIFIED", datetime(2026, 11, 20, 10, 1, tzinfo=UTC))  # within the message's bound


def test_a_submission_is_written_once_whatever_its_status_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job's status changes with every pod's; its manifest is written once per submission (the
    YAML writers cost a millisecond or so), and again as soon as what was submitted changes."""
    writes: list[object] = []

    def counting(dump: Callable[..., str]) -> Callable[..., str]:
        def counted(data: object, **options: Any) -> str:
            writes.append(data)
            return dump(data, **options)

        return counted

    for writer in ("safe_dump", "dump"):  # PyYAML's own writer, or libyaml's where it writes the same
        monkeypatch.setattr(manifests.yaml, writer, counting(getattr(yaml, writer)))
    job = _submitted()
    job["spec"]["runPolicy"] = {"backoffLimit": 7}  # this test's own submission: not written before
    first = manifest(job)
    for second in range(10):
        job = copy.deepcopy(job)
        job["metadata"]["resourceVersion"] = str(1000 + second)
        job["status"] = {
            "conditions": [{"type": "Running", "lastTransitionTime": f"2026-11-20T10:00:{second:02}Z"}]
        }
        assert manifest(job) == first
    assert len(writes) == 1
    job["spec"]["runPolicy"] = {"backoffLimit": 8}
    changed = manifest(job)
    assert len(writes) == 2 and "backoffLimit: 8" in changed and changed != first
    job["metadata"]["labels"] = {"team": "b"}
    assert "team: b" in manifest(job) and len(writes) == 3


def test_what_is_kept_written_stays_within_its_bound() -> None:
    written = manifests._Written(limit=10_000)
    for n in range(100):
        written.put(n.to_bytes(4, "big"), "x" * 1_000)
    assert written.get((99).to_bytes(4, "big")) is not None
    assert written.get((0).to_bytes(4, "big")) is None
    assert sum(written.get(n.to_bytes(4, "big")) is not None for n in range(100)) == 10


_PRINTABLE_ASCII = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300)
_SPEC = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _PRINTABLE_ASCII
    | st.text(max_size=300),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=130)
            | st.text(max_size=20),
            inner,
            max_size=4,
        )
    ),
    max_leaves=30,
)


@given(_SPEC)
@example({"": 1})  # libyaml writes these otherwise: an empty key,
@example({"k" * 123: 1})  # a long one,
@example({"args": ["a\tb " * 50]})  # a long string it quotes
@example({"args": ["set -e\n" + "echo 'ü' && python train.py --lr 0.1\n" * 3]})
@settings(max_examples=300, deadline=None)
def test_the_text_is_pyyamls_whichever_writer_writes_it(spec: Any) -> None:
    """libyaml writes what it writes as PyYAML's pure-Python writer does; the rest is PyYAML's:
    a manifest stored before reads the same as one stored after, and Compare shows no change."""
    submitted = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": spec,
    }
    pure = yaml.safe_dump(manifests._clean(submitted), sort_keys=False, allow_unicode=True, width=120)
    assert manifests._written(submitted) == manifests._cut(pure)
