"""Which raw observations are failure signals, published ahead of ordinary updates (the watcher's
urgent lane) and read ahead by the rules: a pod that failed or has a container that ended
non-zero, and a Warning event."""

from __future__ import annotations

import pytest

from controller.testing import objects as k
from watchers.normalizing import failure_signal

JOB = k.mpijob()
RUNNING = k.with_container_state(k.pod(JOB, "worker", 0), {"running": {}}, phase="Running", ready=True)


@pytest.mark.parametrize(
    ("kind", "obj", "urgent"),
    [
        ("pod", RUNNING, False),
        (
            "pod",
            k.with_container_state(
                RUNNING, {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}, phase="Running"
            ),
            True,
        ),
        ("pod", k.with_container_state(RUNNING, {"terminated": {"exitCode": 0}}, phase="Succeeded"), False),
        ("pod", k.with_container_state(RUNNING, {"waiting": {}}, phase="Failed", reason="Evicted"), True),
        ("event", k.event(RUNNING, "BackOff", "Back-off restarting failed container"), True),
        ("event", k.event(RUNNING, "Scheduled", "Successfully assigned", type_="Normal"), False),
        ("job", JOB, False),
    ],
    ids=["running", "oom-killed", "succeeded", "evicted", "warning-event", "normal-event", "job"],
)
def test_what_counts_as_a_failure_signal(kind: str, obj: k.Obj, urgent: bool) -> None:
    assert failure_signal(kind, obj) is urgent
