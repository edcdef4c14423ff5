"""A failure's log tail is read in threads of its own: while the default executor's threads are
all taken (a restart's lists beside their resumed watches, read page by page, each holding one
for the whole list), the failed pod is still handed on at once (issue 40)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from controller.contract.events import Change
from controller.contract.settings import WatcherSettings
from controller.testing import objects as k
from watchers.tails import LogTails, PodHandover, Tails


class Logs:
    def read_log_tail(
        self, namespace: str, pod: str, container: str, tail_lines: int, limit_bytes: int
    ) -> list[str]:
        return [f"{pod}: CUDA out of memory"]


async def test_a_failed_pod_is_handed_on_while_the_default_executor_is_busy() -> None:
    loop = asyncio.get_running_loop()
    busy = ThreadPoolExecutor(2, thread_name_prefix="lists")
    lists_end = threading.Event()
    loop.set_default_executor(busy)
    lists = [asyncio.ensure_future(asyncio.to_thread(lists_end.wait, 10)) for _ in range(2)]
    pod = k.oom_killed(k.pod(k.mpijob("big", workers=2), "worker", 1))
    handed: list[tuple[Change, Tails]] = []
    arrived = asyncio.Event()

    async def hand_on(change: Change, obj: Mapping[str, Any], tails: Tails) -> None:
        handed.append((change, tails))
        arrived.set()

    handover = PodHandover(LogTails(Logs(), WatcherSettings()), hand_on, reads_in_flight=4)
    try:
        await handover("MODIFIED", pod)
        await asyncio.wait_for(arrived.wait(), timeout=5)
        assert not lists_end.is_set() and not any(task.done() for task in lists), "the lists still read"
        name = pod["metadata"]["name"]
        assert handed == [("MODIFIED", {"worker": (f"{name}: CUDA out of memory",)})]
    finally:
        lists_end.set()
        await asyncio.gather(*lists)
        await handover.close()
