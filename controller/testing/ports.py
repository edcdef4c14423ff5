"""Free loopback ports for the servers tests, benchmarks and the demo start.

A port is picked *below* the kernel's ephemeral range (``ip_local_port_range``), where the
kernel never hands out ports on its own: a port taken from that range (by binding port 0)
could be given to any process that binds port 0 or opens a connection between the pick and
its use — another of the controller's processes, say, serving its metrics on "any free port".
"""

from __future__ import annotations

import random
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


def free_port() -> int:
    """A currently unused loopback port outside the ephemeral range (for tests), never one this
    process handed out before."""
    highest = _ephemeral_start() - 1
    for _ in range(200):
        port = random.randint(_LOWEST, highest) if highest > _LOWEST else 0
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
    raise RuntimeError(f"no free loopback port between {_LOWEST} and {highest}")
