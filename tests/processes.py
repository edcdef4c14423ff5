"""Ending the processes a test started as the kubelet ends a pod's: SIGTERM, a grace period, then
SIGKILL."""

from __future__ import annotations

import signal
import subprocess

GRACE_S = 30
"""How long a process may take to shut down once told to."""


def stop(*processes: subprocess.Popen[bytes]) -> None:
    """Tell every process to stop at once, then wait for each; kill one that outlives its grace."""
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
