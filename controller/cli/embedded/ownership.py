"""``owner.lock``: which process owns an embedded server of a data directory."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

__all__ = ["OwnerLock"]


class OwnerLock:
    """``owner.lock`` of a server's data directory: held (flock) by the process that owns the
    server, released by the kernel when that process ends however it ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock if no live process holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return True

    def holder(self) -> str:
        """Who holds the lock, for messages."""
        with contextlib.suppress(OSError, ValueError):
            return f"pid {int(self.path.read_text().strip())}"
        return "another process"

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
