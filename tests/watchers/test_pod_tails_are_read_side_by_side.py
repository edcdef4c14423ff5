"""Pods that fail together have their log tails read side by side, each pod's changes still
handed on in the order they were watched: a slow read of one pod holds back that pod only."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

from controller.contract.events import Change
from controller.contract.settings import WatcherSettings
from controller.testing import objects as k
from controller.testing.waits import until
from watchers.tails import LogTails, PodHandover, Tails


class HeldLogs:
    """A log reader whose reads of the pods in ``held`` wait until released."""

    def __init__(self, *held: str) -> None:
        self.held = {name: threading.Event() for name in held}
        self.reads: list[str] = []

    def read_log_tail(
        self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int
    ) -> list[str]:
        self.reads.append(pod)
        if pod in self.held:
            self.held[pod].wait(10)
        return [f"{pod}: RuntimeError: NCCL error"]


def failed(name: str, index: int) -> dict[str, Any]:
    return k.oom_killed(k.pod(k.mpijob(name, workers=2), "worker", index))


async def test_one_slow_read_holds_back_its_own_pod_only() -> None:
    slow, fast = failed("slow", 0), failed("fast", 1)
    logs = HeldLogs(slow["metadata"]["name"])
    handed: list[tuple[str, Change, Tails]] = []

    async def hand_on(change: Change, pod: Mapping[str, Any], tails: Tails) -> None:
        handed.append((pod["metadata"]["name"], change, tails))

    handover = PodHandover(LogTails(logs, WatcherSettings()), hand_on, reads_in_flight=4)
    try:
        await handover("MODIFIED", slow)
        await handover("DELETED", slow)  # must wait for the failure before it
        await handover("MODIFIED", fast)
        await until(lambda: len(handed) == 1)
        assert handed[0][0] == fast["metadata"]["name"], "read beside the slow one, handed on first"
        assert handover.busy
        logs.held[slow["metadata"]["name"]].set()
        await until(lambda: len(handed) == 3)
    finally:
        logs.held[slow["metadata"]["name"]].set()
        await handover.close()

    name = slow["metadata"]["name"]
    assert [(n, c) for n, c, _ in handed[1:]] == [(name, "MODIFIED"), (name, "DELETED")], "in watch order"
    assert handed[1][2] == {"worker": (f"{name}: RuntimeError: NCCL error",)}
    assert not handover.busy


async def test_changes_without_a_read_go_on_at_once_unless_their_pod_waits() -> None:
    running = k.pod(k.mpijob("ok", workers=1), "worker", 0)
    logs = HeldLogs()
    handed: list[str] = []

    async def hand_on(change: Change, pod: Mapping[str, Any], tails: Tails) -> None:
        handed.append(change)

    handover = PodHandover(LogTails(logs, WatcherSettings()), hand_on, reads_in_flight=1)
    await handover("ADDED", running)
    assert handed == ["ADDED"] and not handover.busy and logs.reads == [], "no task, no read"
    await handover.close()


async def test_reads_in_flight_are_bounded() -> None:
    pods = [failed(f"job{i}", 0) for i in range(5)]
    logs = HeldLogs(*(p["metadata"]["name"] for p in pods))
    handed: list[str] = []

    async def hand_on(change: Change, pod: Mapping[str, Any], tails: Tails) -> None:
        handed.append(pod["metadata"]["name"])

    handover = PodHandover(LogTails(logs, WatcherSettings()), hand_on, reads_in_flight=2)
    try:
        for pod in pods:
            await handover("MODIFIED", pod)
        await until(lambda: len(logs.reads) == 2)
        await asyncio.sleep(0.05)
        assert len(logs.reads) == 2, "no third read while two are in flight"
    finally:
        for event in logs.held.values():
            event.set()
    await until(lambda: len(handed) == 5)
    await handover.close()
