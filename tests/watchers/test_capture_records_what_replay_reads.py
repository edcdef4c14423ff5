"""``capture`` records a cluster's watch streams (with the log tail of a failed container) to
JSON Lines that ``replay`` reads back into the same observations."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from controller.kube.resources import WATCHED
from controller.testing import objects as k
from controller.testing.simcluster import SimCluster
from controller.testing.waits import until
from tests.history.test_end_to_end_watch_to_history import kubeconfig
from watchers.recording import read_observations

pytestmark = pytest.mark.slow


async def test_capture_then_replay(sim: SimCluster, tmp_path: Path) -> None:
    out = tmp_path / "capture.jsonl"
    env = {**os.environ, "MPIJC_KUBE__KUBECONFIG": str(kubeconfig(sim, tmp_path / "kubeconfig"))}
    process = subprocess.Popen(
        [sys.executable, "-m", "controller.cli", "capture", "--out", str(out)],
        env=env,
        cwd=tmp_path,
        stderr=subprocess.PIPE,
    )
    try:
        await until(lambda: sum(sim.open_watches().values()) == len(WATCHED), 30)
        job = k.mpijob("captured", workers=1)
        worker = k.pod(job, "worker", 0, node="gpu-0")
        sim.create(job)
        sim.create(worker)
        sim.set_log(
            "team-a", "captured-worker-0", "worker", "epoch 1\ntorch.OutOfMemoryError: CUDA out of memory.\n"
        )
        sim.update(
            k.with_container_state(worker, {"terminated": {"exitCode": 1, "reason": "Error"}}, phase="Failed")
        )
        await until(lambda: out.exists() and len(out.read_text().splitlines()) == 3, 10)
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err.decode()[-2000:]

    observations = list(read_observations(out))
    seen = [(o.kind, o.change, o.object["metadata"]["name"]) for o in observations]
    # job and pod watches are separate streams: only each object's own order is guaranteed
    assert sorted(seen) == [
        ("job", "ADDED", "captured"),
        ("pod", "ADDED", "captured-worker-0"),
        ("pod", "MODIFIED", "captured-worker-0"),
    ]
    pods = [o for o in observations if o.kind == "pod"]
    assert [o.change for o in pods] == ["ADDED", "MODIFIED"]
    assert pods[-1].log_tail == ("epoch 1", "torch.OutOfMemoryError: CUDA out of memory.")
