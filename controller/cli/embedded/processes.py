"""What runs and what listens on this machine (Linux ``/proc``; elsewhere only what ``kill(0)`` tells).

The embedded servers use these to tell their own server from anything else on a port, to
stop a server left behind, and to tie a child process's life to its parent's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "alive",
    "cmdline",
    "die_with_this_process",
    "end_child",
    "listening_pids",
    "option",
    "port_open",
    "program",
    "same_path",
    "terminate",
    "zombie",
]

PROC = Path("/proc")
STOP_WAIT_S = 30.0
"""How long :func:`terminate` waits for a process before it kills it."""


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something accepts TCP connections on host:port."""
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie is not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return not PROC.is_dir()  # no /proc: kill(0) is all there is
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def zombie(pid: int) -> bool:
    """Whether ``pid`` has ended but its parent has not reaped it yet (it still answers ``kill(0)``)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["Z"], ["X"])


def cmdline(pid: int) -> list[str]:
    """The command line of ``pid``; empty when it is gone or cannot be read."""
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.split(b"\0") if arg]


def option(args: list[str], *names: str) -> str | None:
    """The value given to the first of ``names`` in ``args`` (``-x value`` or ``-x=value``)."""
    for index, arg in enumerate(args):
        for name in names:
            if arg == name and index + 1 < len(args):
                return args[index + 1]
            if arg.startswith(f"{name}="):
                return arg.partition("=")[2]
    return None


def same_path(found: str | Path | None, ours: Path) -> bool:
    """Whether ``found`` names the same file as ``ours`` (False when it is empty or unreadable)."""
    if not found:
        return False
    with contextlib.suppress(OSError):
        return Path(found).resolve() == ours.resolve()
    return False


def listening_pids(port: int) -> list[int]:
    """Processes listening on TCP ``port`` (those this process may inspect)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            columns = row.split()
            if len(columns) > 9 and columns[3] == "0A" and int(columns[1].rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{columns[9]}]")
    if not inodes:
        return []
    pids: list[int] = []
    with contextlib.suppress(OSError):
        for entry in PROC.iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if any(str(fd.readlink()) in inodes for fd in (entry / "fd").iterdir()):
                    pids.append(int(entry.name))
    return pids


def program(pid: int) -> str:
    """``name (pid N)`` of a process, for messages."""
    args = cmdline(pid)
    return f"{Path(args[0]).name} (pid {pid})" if args else f"pid {pid}"


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def terminate(pid: int, sig: int = signal.SIGTERM, timeout_s: float = STOP_WAIT_S) -> None:
    """Send ``sig`` to ``pid`` and wait for it to end; SIGKILL when it does not in time."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
        if not _wait_gone(pid, timeout_s):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5)


def end_child(process: subprocess.Popen[bytes], grace_s: float, kill_wait_s: float = 5.0) -> None:
    """SIGTERM the child ``process`` and wait ``grace_s`` for it to end; SIGKILL when it does not
    (then wait ``kill_wait_s`` more)."""
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(kill_wait_s)


_PR_SET_PDEATHSIG = 1


def die_with_this_process(sig: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child receive ``sig`` when this process dies, SIGKILL
    included (Linux ``prctl(PR_SET_PDEATHSIG)``); None where that is not available.

    The signal follows the thread that starts the child, so only a start from the main thread
    (whose end is the process's end) gets it; a start from another thread relies on the next
    start's takeover instead."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()

    def set_parent_death_signal() -> None:  # runs in the child between fork and exec
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the owner died before the signal was armed
            os._exit(1)

    return set_parent_death_signal
