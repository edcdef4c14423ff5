"""``replay`` reads capture JSON Lines and ``kubectl get -w -o json`` output; bad input is skipped."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from controller.testing import objects as k
from watchers.recording import ReadStats, bounded_tail, read_observations, write_record


def test_capture_lines_round_trip_with_log_tails(tmp_path: Path) -> None:
    job = k.mpijob()
    worker = k.with_container_state(
        k.pod(job, "worker", 2), {"terminated": {"exitCode": 1, "reason": "Error"}}, phase="Failed"
    )
    path = tmp_path / "capture.jsonl"
    with path.open("w") as out:
        write_record(out, "ADDED", job, datetime(2026, 11, 20, 10, tzinfo=UTC), None)
        write_record(
            out,
            "MODIFIED",
            worker,
            datetime(2026, 11, 20, 10, 5, tzinfo=UTC),
            {"worker": "step 1\nstep 2\ntorch.OutOfMemoryError: CUDA out of memory."},
        )

    stats = ReadStats()
    observations = list(read_observations(path, log_tail_lines=2, stats=stats))

    assert [(o.kind, o.change) for o in observations] == [("job", "ADDED"), ("pod", "MODIFIED")]
    assert observations[1].observed_at == datetime(2026, 11, 20, 10, 5, tzinfo=UTC)
    assert observations[1].log_tail == ("step 2", "torch.OutOfMemoryError: CUDA out of memory.")
    assert stats.records == 2 and stats.malformed == 0


def test_kubectl_watch_output_pretty_printed_and_lists(tmp_path: Path) -> None:
    job = k.mpijob()
    running = k.with_conditions(job, ("Running", "MPIJobRunning", "2026-11-20T10:01:00Z"))
    path = tmp_path / "kubectl.json"
    path.write_text(
        json.dumps(job, indent=4)
        + "\n"
        + json.dumps(running, indent=4)
        + "\n"
        + json.dumps({"apiVersion": "v1", "kind": "List", "items": [k.pod(job, "launcher")]})
    )

    observations = list(read_observations(path))

    assert [(o.kind, o.change) for o in observations] == [
        ("job", "ADDED"),
        ("job", "MODIFIED"),
        ("pod", "ADDED"),
    ]


def test_malformed_lines_and_unknown_kinds_are_counted_and_skipped(tmp_path: Path) -> None:
    job = k.mpijob()
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "uid": "c1"}}
    no_uid = k.mpijob()
    del no_uid["metadata"]["uid"]
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"type": "ADDED", "object": job}),
                "{this is not json",
                json.dumps({"type": "ADDED", "object": configmap}),
                json.dumps({"type": "EXPLODED", "object": job}),
                json.dumps({"type": "ADDED", "object": no_uid}),
                json.dumps([1, 2, 3]),
                json.dumps({"type": "MODIFIED", "object": job}),
            ]
        )
    )

    stats = ReadStats()
    observations = list(read_observations(path, stats=stats))

    assert [o.change for o in observations] == ["ADDED", "MODIFIED"]
    assert (stats.records, stats.malformed, stats.unknown_kind) == (2, 4, 1)
    assert stats.skipped_kinds == {"ConfigMap": 1}


def test_log_tail_is_bounded_by_lines_and_bytes() -> None:
    text = "\n".join(f"line {i} " + "x" * 20 for i in range(100))
    assert len(bounded_tail(text, 10, 10_000)) == 10
    tail = bounded_tail(text, 100, 100)
    assert 0 < sum(len(line) + 1 for line in tail) <= 100 and tail[-1].startswith("line 99")
