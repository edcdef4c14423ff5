"""Free loopback ports for the servers tests, benchmarks and the demo start."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A currently unused loopback port (for tests)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port
