"""Free loopback ports for the servers tests, benchmarks and the demo start.

A port is picked *below* the kernel's ephemeral range (``ip_local_port_range``), where the
kernel never hands out ports on its own: a port taken from that range (by binding port 0)
could be given to any process that binds port 0 or opens a connection between the pick and
its use — another of the controller's processes, say, serving its metrics on "any free port".

Under pytest-xdist each worker (and every process it starts, which inherits
``PYTEST_XDIST_WORKER``) picks from its own slice of that range, so that two workers never pick
the same port between one's pick and its server's bind.
"""

from __future__ import annotations

import os
import random
import re
import socket
from pathlib import Path

__all__ = ["free_port"]

_LOWEST = 10_000
_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_start() -> int:
    try:
        return int(_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


_HANDED: set[int] = set()
"""Ports this process handed out: a test that asks for nine ports before it starts any server
(three NATS servers' client, monitor and cluster ports) must not get one twice."""


def _slice(lowest: int, highest: int) -> tuple[int, int]:
    """This pytest-xdist worker's share of ``lowest..highest``; all of it outside xdist."""
    worker = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    try:
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", ""))
    except ValueError:
        return lowest, highest
    if worker is None or not 0 <= int(worker[1]) < count:
        return lowest, highest
    size = (highest - lowest + 1) // count
    start = lowest + int(worker[1]) * size
    return start, start + size - 1


def free_port() -> int:
    """A currently unused loopback port outside the ephemeral range (for tests), never one this
    process handed out before; within this pytest-xdist worker's slice of the range under xdist."""
    lowest, highest = _slice(_LOWEST, _ephemeral_start() - 1)
    for _ in range(200):
        port = random.randint(lowest, highest) if highest > lowest else 0
        if port in _HANDED:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            bound: int = sock.getsockname()[1]
        _HANDED.add(bound)
        return bound
    raise RuntimeError(f"no free loopback port between {lowest} and {highest}")
